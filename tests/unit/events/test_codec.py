"""The codec accepts every valid event in both content modes and names the field of every invalid one."""

from __future__ import annotations

import msgspec
import pytest

from myolo.events.codec import decode, decode_structured, encode, encode_structured
from myolo.events.envelope import new_event
from myolo.events.errors import InvalidEvent
from myolo.events.examples import example_payloads, node_sample
from myolo.events.types import PAYLOAD_TYPES


@pytest.mark.parametrize("type_", sorted(PAYLOAD_TYPES))
def test_binary_round_trip_of_every_type(type_: str) -> None:
    event = new_event(example_payloads()[type_], "test/src")
    key, value, headers = encode(event)
    back = decode(value, headers, key)
    assert back.data == event.data
    assert (back.id, back.source, back.type, back.time, back.key) == (
        event.id,
        event.source,
        type_,
        event.time,
        event.key,
    )
    assert dict(headers)["ce_type"] == type_.encode()


@pytest.mark.parametrize("type_", sorted(PAYLOAD_TYPES))
def test_structured_round_trip_of_every_type(type_: str) -> None:
    event = new_event(example_payloads()[type_], "test/src")
    back = decode(encode_structured(event))
    assert back.data == event.data and back.id == event.id and back.key == event.key


def test_unknown_fields_from_a_newer_minor_version_are_tolerated() -> None:
    event = new_event(node_sample(gpus=1), "agent/x")
    _, value, headers = encode(event)
    doc = msgspec.json.decode(value)
    doc["added_in_v1_3"] = {"x": 1}
    doc["gpus"][0]["fancy_new_counter"] = 7
    assert decode(msgspec.json.encode(doc), headers).data == event.data


def test_absent_readings_stay_absent() -> None:
    """An unsupported reading is not encoded as zero: it is not in the JSON at all."""
    sample = node_sample(gpus=1)
    sample.gpus[0].power_w = None
    _, value, _ = encode(new_event(sample, "agent/x"))
    assert b"power_w" not in value


def _binary(payload_json: dict, type_: str = "ai.myolo.node.sample.v1") -> tuple[bytes, list]:
    event = new_event(node_sample(gpus=1), "agent/x")
    _, _, headers = encode(event)
    headers = [(k, type_.encode() if k == "ce_type" else v) for k, v in headers]
    return msgspec.json.encode(payload_json), headers


def _sample_doc() -> dict:
    return msgspec.to_builtins(node_sample(gpus=2))


@pytest.mark.parametrize(
    ("mutate", "field", "reason"),
    [
        (lambda d: d.pop("node_id"), "data.node_id", "missing required field"),
        (lambda d: d["gpus"][1].pop("uuid"), "data.gpus[1].uuid", "missing required field"),
        (lambda d: d["gpus"][0].update(index="zero"), "data.gpus[0].index", "Expected `int`, got `str`"),
        (lambda d: d["gpus"][0].update(util_gpu=140), "data.gpus[0].util_gpu", "<= 100.0"),
        (lambda d: d["gpus"][1].update(mem_used_bytes=-5), "data.gpus[1].mem_used_bytes", ">= 0"),
        (lambda d: d.update(backend="quantum"), "data.backend", "Invalid enum value 'quantum'"),
        (lambda d: d.update(address="10.0.0.1; rm -rf /"), "data.address", "matching regex"),
        (lambda d: d.update(address="h" * 254), "data.address", "length <= 253"),
        (lambda d: d.update(health_url="file:///etc/passwd"), "data.health_url", "matching regex"),
        (lambda d: d.update(health_url="http://user:pw@node:8080"), "data.health_url", "matching regex"),
        (lambda d: d.update(health_url="http://node:8080/?next=evil"), "data.health_url", "matching regex"),
        (lambda d: d.update(health_url="http://" + "n" * 600), "data.health_url", "length <= 512"),
    ],
)
def test_invalid_payloads_name_the_field(mutate, field: str, reason: str) -> None:
    doc = _sample_doc()
    mutate(doc)
    value, headers = _binary(doc)
    with pytest.raises(InvalidEvent) as info:
        decode(value, headers)
    assert info.value.field == field
    assert reason in info.value.reason


@pytest.mark.parametrize(
    ("value", "headers", "field", "reason"),
    [
        (None, [], "value", "no value"),
        (b"x" * 2000, [], "value", "the record is 2000 bytes; the limit is 1000"),
        (b"\xff\xfe not json", [], "value", "not valid JSON"),
        (b"[1, 2]", [], "value", "JSON object"),
        (b'{"hello": "world"}', [], "specversion", "not a CloudEvent"),
    ],
)
def test_invalid_records_name_the_field(value, headers, field: str, reason: str) -> None:
    with pytest.raises(InvalidEvent) as info:
        decode(value, headers, max_bytes=1000)
    assert info.value.field == field
    assert reason in info.value.reason


def test_unknown_type_and_unsupported_version_are_told_apart() -> None:
    value, headers = _binary(_sample_doc(), "ai.myolo.node.sample.v9")
    with pytest.raises(InvalidEvent, match="unsupported version") as info:
        decode(value, headers)
    assert info.value.field == "type"
    value, headers = _binary(_sample_doc(), "com.example.whatever.v1")
    with pytest.raises(InvalidEvent, match="unknown event type"):
        decode(value, headers)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"ce_specversion": b"0.3"}, "header ce_specversion"),
        ({"ce_id": b""}, "header ce_id"),
        ({"ce_time": b"yesterday"}, "header ce_time"),
        ({"ce_time": b"2026-01-01T00:00:00"}, "header ce_time"),
        ({"content-type": b"application/xml"}, "header content-type"),
    ],
)
def test_bad_envelope_headers(change: dict, field: str) -> None:
    key, value, headers = encode(new_event(node_sample(gpus=1), "agent/x"))
    headers = [(k, change.get(k, v)) for k, v in headers]
    with pytest.raises(InvalidEvent) as info:
        decode(value, headers, key)
    assert info.value.field == field


def test_structured_mode_carries_extensions_and_rejects_base64() -> None:
    event = new_event(node_sample(gpus=1), "ext/system")
    doc = msgspec.json.decode(encode_structured(event))
    doc["traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    back = decode_structured(msgspec.json.encode(doc))
    assert back.extensions["traceparent"].startswith("00-0af76519")
    doc["data_base64"] = "AAAA"
    with pytest.raises(InvalidEvent) as info:
        decode_structured(msgspec.json.encode(doc))
    assert info.value.field == "data_base64"
