"""Every bound of the event contract: a record over one is rejected with a reason naming the limit."""

from __future__ import annotations

import msgspec
import pytest

from myolo.events.codec import decode, encode, encode_structured
from myolo.events.envelope import new_event
from myolo.events.errors import InvalidEvent
from myolo.events.examples import example_payloads, node_sample
from myolo.events.limits import ATTRIBUTE_BYTES, MAX_DEPTH, MAX_EXTENSIONS, MAX_HEADERS, MAX_KEY_BYTES

ACK = "ai.myolo.command.ack.v1"
COMMAND = "ai.myolo.command.v1"


def _binary(type_: str = "ai.myolo.node.fault.v1", **change: bytes):
    key, value, headers = encode(new_event(example_payloads()[type_], "test/src"))
    return key, value, [(k, change.get(k, v)) for k, v in headers]


def _rejected(value, headers=(), key=None) -> InvalidEvent:
    with pytest.raises(InvalidEvent) as info:
        decode(value, headers, key)
    return info.value


@pytest.mark.parametrize("attr", ["id", "source", "type", "subject", "time", "specversion"])
def test_each_attribute_is_bounded_in_binary_mode(attr: str) -> None:
    limit = ATTRIBUTE_BYTES[attr]
    key, value, headers = _binary()
    headers = [(k, v) for k, v in headers if k != f"ce_{attr}"] + [(f"ce_{attr}", b"a" * 900_000)]
    error = _rejected(value, headers, key)
    assert error.field == f"header ce_{attr}"
    assert error.reason == f"{attr} is 900000 bytes; the limit is {limit}"


@pytest.mark.parametrize("attr", ["id", "source", "type", "subject"])
def test_each_attribute_is_bounded_in_structured_mode(attr: str) -> None:
    doc = msgspec.json.decode(encode_structured(new_event(node_sample(gpus=1), "ext/x")))
    doc[attr] = "\u00e9" * 1000  # 2000 bytes in UTF-8
    error = _rejected(msgspec.json.encode(doc))
    assert (error.field, error.reason) == (attr, f"{attr} is 2000 bytes; the limit is {ATTRIBUTE_BYTES[attr]}")


def test_an_attribute_at_its_limit_is_accepted() -> None:
    key, value, headers = _binary(ce_id=b"i" * ATTRIBUTE_BYTES["id"])
    assert decode(value, headers, key).id == "i" * ATTRIBUTE_BYTES["id"]


def test_headers_extensions_and_names_are_bounded() -> None:
    key, value, headers = _binary()
    error = _rejected(value, headers + [(f"x-h{i}", b"v") for i in range(MAX_HEADERS)], key)
    assert error.field == "headers" and f"the limit is {MAX_HEADERS}" in error.reason
    error = _rejected(value, headers + [(f"ce_x{i}", b"v") for i in range(MAX_EXTENSIONS + 1)], key)
    assert f"{MAX_EXTENSIONS + 1} extension attributes; the limit is {MAX_EXTENSIONS}" in error.reason
    for bad in ("ce_under_score", "ce_" + "n" * 21, "ce_\u00e9t\u00e9"):
        error = _rejected(value, [*headers, (bad, b"v")], key)
        assert error.field == f"header {bad}" and "1-20 lowercase letters or digits" in error.reason
    error = _rejected(value, [*headers, ("traceparent", b"v" * 5000)], key)
    assert error.reason == "header traceparent is 5000 bytes; the limit is 4096"
    error = _rejected(value, [*headers, ("content-type", b"application/json" * 100)], key)
    assert error.reason == "content-type is 1600 bytes; the limit is 256"
    # a header we do not read is not ours to judge (beyond the count): it is neither decoded nor rejected
    assert decode(value, [*headers, ("x-" + "n" * 300, b"\xff" * 5000)], key).id


def test_structured_extensions_are_scalars_within_bounds() -> None:
    doc = msgspec.json.decode(encode_structured(new_event(node_sample(gpus=1), "ext/x")))
    ok = {**doc, "attempt": 3, "replay": True, "note": None}
    assert decode(msgspec.json.encode(ok)).extensions == {"attempt": "3", "replay": "true"}
    for bad in ([1, 2], {"a": 1}, 1.5):
        error = _rejected(msgspec.json.encode({**doc, "traceparent": bad}))
        assert error.field == "traceparent" and "string, integer or boolean" in error.reason
    error = _rejected(msgspec.json.encode({**doc, **{f"e{i}": "v" for i in range(MAX_EXTENSIONS + 1)}}))
    assert f"the limit is {MAX_EXTENSIONS}" in error.reason


def test_the_key_is_bounded() -> None:
    _, value, headers = _binary()
    error = _rejected(value, headers, b"k" * (MAX_KEY_BYTES + 1))
    assert (error.field, error.reason) == ("key", f"key is {MAX_KEY_BYTES + 1} bytes; the limit is {MAX_KEY_BYTES}")


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_deeply_nested_records_are_rejected_for_their_depth() -> None:
    """A 6 KB structured CloudEvent whose data is 3,000 nested arrays; a 2 KB binary ack nesting 1,000."""
    doc = encode_structured(new_event(example_payloads()["ai.myolo.node.fault.v1"], "ext/kcat"))
    cut = doc.index(b'"data":') + len(b'"data":')
    structured = doc[:cut] + _nested(3000) + b"}"
    assert 6000 <= len(structured) < 6500
    error = _rejected(structured)
    assert (
        error.field == "value"
        and error.reason == f"nests deeper than {MAX_DEPTH} levels of arrays and objects; the limit is {MAX_DEPTH}"
    )
    key, _, headers = _binary(ACK)
    for value in (
        b'{"command_id":"c","node_id":"n","epoch":1,"status":"done","result":{"r":' + _nested(1000) + b"}}",
        b'{"unknown":' + _nested(1000) + b',"command_id":"c","node_id":"n","epoch":1,"status":"done"}',
    ):
        assert 2000 <= len(value) < 2200
        error = _rejected(value, headers, key)
        assert error.field == "data" and f"the limit is {MAX_DEPTH}" in error.reason


@pytest.mark.parametrize("type_", [ACK, COMMAND])
def test_untyped_fields_may_nest_up_to_the_limit_and_no_deeper(type_: str) -> None:
    """The payload object is level 1 and ``args``/``result`` level 2: 30 arrays inside it make 32 levels."""
    name = "result" if type_ == ACK else "args"
    key, _, headers = _binary(type_)
    doc = msgspec.to_builtins(example_payloads()[type_])
    doc[name] = {"deep": msgspec.json.decode(_nested(MAX_DEPTH - 2))}
    assert getattr(decode(msgspec.json.encode(doc), headers, key).data, name)["deep"]
    doc[name] = {"deep": msgspec.json.decode(_nested(MAX_DEPTH - 1))}
    error = _rejected(msgspec.json.encode(doc), headers, key)
    assert error.field == f"data.{name}" and f"the limit is {MAX_DEPTH}" in error.reason
    doc[name] = {"wide": list(range(5000)), "strings": ["[" * 40] * 3}  # brackets in strings are not nesting
    assert decode(msgspec.json.encode(doc), headers, key).data
