"""The consumer's per-record logic: duplicates dropped, handler failures retried then dead-lettered.

The broker is not involved here (records are built by hand); the same paths run against the real broker in
tests/integration/events. The dead-letter producer is a recorder, since only what would be sent matters."""

from __future__ import annotations

from aiokafka import ConsumerRecord

from events.bus import EventConsumer
from events.clock import SimClock
from events.codec import encode
from events.deadletter import dead_letter_info
from events.envelope import new_event
from events.examples import example_payloads, node_sample
from events.settings import KafkaSettings


class InstantClock(SimClock):
    """Backoff sleeps pass at once (and are counted in simulated time)."""

    async def sleep(self, seconds: float) -> None:
        self._t += seconds


class DeadLetters:
    def __init__(self) -> None:
        self.sent: list[tuple] = []

    async def send_raw(self, topic, value, key, headers):
        self.sent.append((topic, value, key, headers))


def _record(event, offset: int = 0) -> ConsumerRecord:
    key, value, headers = encode(event)
    return ConsumerRecord("myolo.node.samples", 0, offset, 0, 0, key, value, None, len(key), len(value), headers)


def _consumer(handler, dlq: DeadLetters, clock=None) -> EventConsumer:
    settings = KafkaSettings(bootstrap="127.0.0.1:1")
    return EventConsumer(
        settings, ["myolo.node.samples"], "g", handler, dead_letters=dlq, clock=clock or InstantClock()
    )


async def test_duplicates_are_handled_once() -> None:
    seen = []

    async def handler(event, info):
        seen.append(event.id)

    consumer = _consumer(handler, DeadLetters())
    event = new_event(node_sample(gpus=1), "agent/x")
    for offset in range(3):
        await consumer.process(_record(event, offset))
    assert seen == [event.id]
    assert consumer.stats.duplicates == 2


async def test_transient_handler_failure_is_retried() -> None:
    calls = []

    async def flaky(event, info):
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("store briefly away")

    clock = InstantClock()
    dlq = DeadLetters()
    consumer = _consumer(flaky, dlq, clock)
    await consumer.process(_record(new_event(node_sample(gpus=1), "agent/x")))
    assert len(calls) == 3 and consumer.stats.handled == 1 and not dlq.sent
    assert clock.monotonic() > 0  # it backed off between attempts


async def test_persistent_handler_failure_is_dead_lettered_and_consumption_goes_on() -> None:
    async def broken(event, info):
        if event.data.node_id == "poison":
            raise ValueError("cannot place node")

    dlq = DeadLetters()
    consumer = _consumer(broken, dlq)
    poison = _record(new_event(node_sample("poison", gpus=1), "agent/x"), 0)
    await consumer.process(poison)
    await consumer.process(_record(new_event(node_sample("fine", gpus=1), "agent/x"), 1))
    assert consumer.stats.handled == 1 and consumer.stats.dead_lettered == 1
    topic, value, key, headers = dlq.sent[0]
    info = dead_letter_info(headers)
    assert topic == "myolo.deadletter" and key == b"poison" and value == poison.value
    assert info["field"] == "handler" and "ValueError: cannot place node" in info["reason"]
    assert info["offset"] == "0" and info["group"] == "g"


async def test_wrong_type_for_the_topic_is_dead_lettered() -> None:
    async def handler(event, info):
        raise AssertionError("must not be called")

    dlq = DeadLetters()
    consumer = _consumer(handler, dlq)
    await consumer.process(_record(new_event(example_payloads()["ai.myolo.command.v1"], "x")))
    assert "does not belong on topic" in dead_letter_info(dlq.sent[0][3])["reason"]


async def test_records_keyed_for_someone_else_are_skipped_before_decoding() -> None:
    seen = []

    async def handler(event, info):
        seen.append(event.data.node_id)

    dlq = DeadLetters()
    consumer = EventConsumer(
        KafkaSettings(bootstrap="127.0.0.1:1"), ["myolo.node.samples"], "g", handler, dead_letters=dlq,
        clock=InstantClock(), accept_key=lambda key: key == b"mine",
    )  # fmt: skip
    garbage = ConsumerRecord("myolo.node.samples", 0, 0, 0, 0, b"theirs", b"not json", None, 6, 8, [])
    await consumer.process(garbage)
    await consumer.process(_record(new_event(node_sample("mine", gpus=1), "agent/x"), 1))
    assert seen == ["mine"] and consumer.stats.skipped == 1 and not dlq.sent
