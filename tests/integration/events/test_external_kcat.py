"""An external producer that is not ours (kcat, librdkafka) writes good and bad records; the consumer takes
the good one, dead-letters each bad one with the right reason, and keeps running."""

from __future__ import annotations

import subprocess
import uuid

from myolo.events.bus import EventConsumer
from myolo.events.examples import node_sample
from myolo.events.payloads import NodeFault
from tests.integration.events.conftest import Running, dead_letters_from
from tests.support.helpers import DROP, KCAT, kcat, structured, wait_until


def sample_event(**changes) -> bytes:
    return structured(node_sample("ext-node", gpus=2), **changes)


def nested_event(depth: int) -> bytes:
    """A structured fault whose data is ``depth`` nested arrays (3,000 of them make a 6 KB record)."""
    doc = structured(NodeFault(node_id="ext-node", kind="xid", health="fail"))
    return doc[: doc.index(b'"data":') + len(b'"data":')] + b"[" * depth + b"]" * depth + b"}"


BINARY_HEADERS = {
    "ce_specversion": "1.0",
    "ce_id": "kcat-bin-1",
    "ce_source": "ext/kcat",
    "ce_type": "ai.myolo.node.sample.v1",
    "content-type": "application/json",
}

MALFORMED = {
    "not-json": (b"this is not json {", None, "value", "not valid JSON"),
    "not-cloudevent": (b'{"temperature": 41}', None, "specversion", "not a CloudEvent"),
    "unknown-type": (sample_event(type="com.example.unknown.v1"), None, "type", "unknown event type"),
    "unsupported-version": (sample_event(type="ai.myolo.node.sample.v7"), None, "type", "unsupported version"),
    "missing-field": (sample_event(data__node_id=DROP), None, "data.node_id", "missing required field"),
    "mistyped-field": (sample_event(data__gpus__0__index="zero"), None, "data.gpus[0].index", "Expected `int`"),
    "impossible-value": (sample_event(data__gpus__1__util_gpu=140), None, "data.gpus[1].util_gpu", "<= 100"),
    "bad-time": (sample_event(time="last tuesday"), None, "time", "RFC 3339"),
    "too-big": (sample_event(data__padding="x" * 20_000), None, "value", "; the limit is 16384"),
    "nested-3000": (nested_event(3000), None, "value", "nests deeper than 32 levels"),
    "huge-id": (
        b"{}",
        {**BINARY_HEADERS, "ce_id": "i" * 100_000},
        "header ce_id",
        "id is 100000 bytes; the limit is 256",
    ),
    "binary-bad-payload": (b'{"node_id": 5}', BINARY_HEADERS, "data.node_id", "Expected `str`"),
}


async def test_kcat_records_valid_and_malformed(kafka, settings, producer, fresh_topic) -> None:
    topic = await fresh_topic(1)
    kcat(kafka.bootstrap, topic, "good-1", sample_event())
    for key, (value, headers, _, _) in MALFORMED.items():
        kcat(kafka.bootstrap, topic, key, value, headers)

    handled: list = []

    async def handler(event, info) -> None:
        handled.append((info.key, event))

    consumer = EventConsumer(
        settings, [topic], f"g-{uuid.uuid4().hex}", handler, dead_letters=producer, max_bytes=16384
    )
    run = Running(consumer)
    try:
        await wait_until(lambda: consumer.stats.consumed >= 1 + len(MALFORMED), what="all kcat records")
        # the consumer is still alive: a valid record after the bad ones is handled too
        kcat(kafka.bootstrap, topic, "good-2", sample_event(id="after-the-bad-ones"))
        await wait_until(lambda: len(handled) == 2, what="the record after the bad ones")
        assert not run.task.done()
    finally:
        await run.stop()
    assert [k for k, _ in handled] == [b"good-1", b"good-2"]
    assert handled[0][1].source == "ext/kcat" and handled[0][1].data.node_id == "ext-node"
    assert consumer.stats.dead_lettered == len(MALFORMED)

    letters = {k: rest for k, *rest in await dead_letters_from(settings, topic, len(MALFORMED))}
    assert set(letters) == set(MALFORMED)
    for key, (value, _, field, reason) in MALFORMED.items():
        original, headers, info = letters[key]
        assert original == value, f"{key}: original bytes kept"
        assert info["field"] == field, key
        assert reason in info["reason"], (key, info["reason"])
        assert info["topic"] == topic and info["partition"] == "0" and int(info["offset"]) >= 0
    assert dict(letters["binary-bad-payload"][1])["ce_id"] == b"kcat-bin-1"  # original headers kept


async def test_a_record_the_kafka_client_cannot_parse_is_stepped_over(kafka, settings, producer, fresh_topic) -> None:
    """A header name that is not UTF-8 makes aiokafka raise while unpacking the fetch, on every fetch."""
    topic = await fresh_topic(1)
    kcat(kafka.bootstrap, topic, "good-1", sample_event(id="before-the-unreadable-one"))
    assert KCAT is not None
    subprocess.run(
        [KCAT, "-P", "-b", kafka.bootstrap, "-t", topic, "-k", "bad", b"-H", b"n\xffme=v"],
        input=sample_event(id="unreadable"),
        check=True,
        timeout=30,
    )
    kcat(kafka.bootstrap, topic, "good-2", sample_event(id="after-the-unreadable-one"))
    handled: list[str] = []

    async def handler(event, info) -> None:
        handled.append(event.id)

    run = Running(EventConsumer(settings, [topic], f"g-{uuid.uuid4().hex}", handler, dead_letters=producer))
    try:
        await wait_until(lambda: len(handled) == 2 and run.consumer.stats.dead_lettered == 1, what="all three")
        assert not run.task.done()
    finally:
        await run.stop()
    assert handled == ["before-the-unreadable-one", "after-the-unreadable-one"]
    [(_, value, _, info)] = await dead_letters_from(settings, topic, 1)
    assert value == b"" and info["value"] == "none" and info["offset"] == "1" and info["field"] == "record"
    assert info["reason"].startswith("the Kafka client cannot read this record") and "utf-8" in info["reason"]
