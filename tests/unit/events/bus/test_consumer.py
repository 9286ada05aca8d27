"""The consumer's per-record logic: duplicates dropped, handler failures retried then dead-lettered.

The broker is not involved here (records are built by hand); the same paths run against the real broker in
tests/integration/events. The dead-letter producer is a recorder, since only what would be sent matters."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import ConsumerRecord
from aiokafka.errors import KafkaConnectionError, MessageSizeTooLargeError

from myolo.common.clock import SimClock
from myolo.events.bus import EventConsumer
from myolo.events.bus.consumer import DeadLetterUnsent
from myolo.events.codec import encode
from myolo.events.deadletter import dead_letter_info, field_kind
from myolo.events.envelope import new_event
from myolo.events.examples import example_payloads, node_sample
from myolo.events.limits import Throttle
from myolo.events.settings import KafkaSettings
from myolo.events.signing import Verifier


class InstantClock(SimClock):
    """Backoff sleeps pass at once (and are counted in simulated time)."""

    async def sleep(self, seconds: float) -> None:
        self._t += seconds


class DeadLetters:
    def __init__(self) -> None:
        self.sent: list[tuple] = []

    async def send_raw(self, topic, value, key, headers):
        assert value is not None or key is not None, "like aiokafka: a record needs a key or a value"
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


async def test_the_dedupe_window_is_the_settings_count_of_ids() -> None:
    seen = []

    async def handler(event, info):
        seen.append(event.id)

    settings = KafkaSettings(bootstrap="127.0.0.1:1", dedupe_window_ids=2)
    consumer = EventConsumer(settings, ["myolo.node.samples"], "g", handler, dead_letters=DeadLetters())
    first, second, third = (new_event(node_sample(gpus=1), "agent/x") for _ in range(3))
    for offset, event in enumerate((first, second, first, third, first)):
        await consumer.process(_record(event, offset))
    # a window of two: the first repeat is a duplicate; once two newer ids came, the first one is forgotten
    assert seen == [first.id, second.id, third.id, first.id]
    assert consumer.stats.duplicates == 1


def test_the_dedupe_window_must_hold_an_id() -> None:
    import msgspec

    with pytest.raises(msgspec.ValidationError, match="dedupe_window_ids"):
        msgspec.convert({"dedupe_window_ids": 0}, KafkaSettings)


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
        KafkaSettings(bootstrap="127.0.0.1:1"),
        ["myolo.node.samples"],
        "g",
        handler,
        dead_letters=dlq,
        clock=InstantClock(),
        accept_key=lambda key: key == b"mine",
    )
    garbage = ConsumerRecord("myolo.node.samples", 0, 0, 0, 0, b"theirs", b"not json", None, 6, 8, [])
    await consumer.process(garbage)
    await consumer.process(_record(new_event(node_sample("mine", gpus=1), "agent/x"), 1))
    assert seen == ["mine"] and consumer.stats.skipped == 1 and not dlq.sent


class Boom(BaseException):
    """Neither an Exception nor cancellation."""


@pytest.mark.parametrize("error", [RecursionError("deep"), Boom("odd"), MemoryError()])
async def test_a_handler_failing_in_any_way_but_cancellation_is_dead_lettered(error: BaseException) -> None:
    async def handler(event, info):
        raise error

    dlq = DeadLetters()
    consumer = _consumer(handler, dlq)
    await consumer.process(_record(new_event(node_sample(gpus=1), "agent/x")))
    assert consumer.stats.dead_lettered == 1 and consumer.stats.handler_retries == 2
    assert dead_letter_info(dlq.sent[0][3])["reason"].startswith(f"handler failed: {type(error).__name__}")


@pytest.mark.parametrize("error", [asyncio.CancelledError(), KeyboardInterrupt(), SystemExit(3)])
async def test_cancellation_and_exit_are_never_swallowed(error: BaseException) -> None:
    async def handler(event, info):
        raise error

    dlq = DeadLetters()
    consumer = _consumer(handler, dlq)
    with pytest.raises(type(error)):
        await consumer.process(_record(new_event(node_sample(gpus=1), "agent/x")))
    assert not dlq.sent and consumer.stats.dead_lettered == 0


async def test_a_check_failing_with_any_exception_is_dead_lettered() -> None:
    class Crashing(Verifier):
        def verify(self, event):
            raise RecursionError("maximum recursion depth exceeded")

    dlq = DeadLetters()
    consumer = EventConsumer(
        KafkaSettings(bootstrap="127.0.0.1:1"),
        ["myolo.node.samples"],
        "g",
        _never,
        dead_letters=dlq,
        clock=InstantClock(),
        verifier=Crashing([]),
    )
    await consumer.process(_record(new_event(node_sample(gpus=1), "agent/x")))
    info = dead_letter_info(dlq.sent[0][3])
    assert info["reason"] == "cannot accept the record: RecursionError: maximum recursion depth exceeded"
    assert info["field"] == "value"


async def _never(event, info):
    raise AssertionError("must not be called")


async def test_dead_lettering_survives_headers_that_are_not_bytes() -> None:
    dlq = DeadLetters()
    consumer = _consumer(_never, dlq)
    headers = [("ce_specversion", "1.0"), (b"raw-name", 7), "not a pair", ("x", None)]
    await consumer.process(ConsumerRecord("myolo.node.samples", 0, 5, 0, 0, None, b"{}", None, 0, 2, headers))
    _, value, _, sent = dlq.sent[0]
    assert value == b"{}"
    assert sent[:4] == [("ce_specversion", b"1.0"), ("raw-name", b"7"), sent[2], ("x", None)]
    assert sent[2][0] == "myolo-dlq-header" and b"not a pair" in sent[2][1]
    assert dead_letter_info(sent)["offset"] == "5"


class FlakySink(DeadLetters):
    """Fails ``failures`` times (the broker is away), then takes the letters."""

    def __init__(self, failures: int, error: Exception | None = None) -> None:
        super().__init__()
        self.failures = failures
        self.error = error or KafkaConnectionError("broker away")

    async def send_raw(self, topic, value, key, headers):
        if self.failures:
            self.failures -= 1
            raise self.error
        await super().send_raw(topic, value, key, headers)


async def test_a_dead_letter_is_retried_until_the_broker_takes_it() -> None:
    dlq = FlakySink(failures=4)
    clock = InstantClock()
    consumer = _consumer(_never, dlq, clock)
    await consumer.process(ConsumerRecord("myolo.node.samples", 0, 0, 0, 0, None, b"nope", None, 0, 4, []))
    assert len(dlq.sent) == 1 and consumer.stats.dead_lettered == 1
    assert consumer.stats.dead_letter_failures == 4 and clock.monotonic() > 0  # backed off between tries


async def test_a_letter_too_large_for_the_broker_goes_without_the_original_value() -> None:
    dlq = FlakySink(failures=1, error=MessageSizeTooLargeError("too large"))
    consumer = _consumer(_never, dlq)
    record = ConsumerRecord("myolo.node.samples", 0, 0, 0, 0, b"k", b"x" * 1000, None, 1, 1000, [("h", b"v")])
    await consumer.process(record)
    _, value, key, headers = dlq.sent[0]
    info = dead_letter_info(headers)
    assert value is None and key == b"k" and ("h", b"v") not in headers
    assert info["dropped"].startswith("original value (1000 bytes) and headers not kept: MessageSizeTooLargeError")
    assert info["reason"] and info["offset"] == "0" and consumer.stats.dead_lettered == 1


async def test_stopped_while_the_broker_is_away_the_record_is_not_passed() -> None:
    dlq = FlakySink(failures=10**9)
    consumer = _consumer(_never, dlq)
    await consumer.stop()
    with pytest.raises(DeadLetterUnsent):
        await consumer.process(ConsumerRecord("myolo.node.samples", 0, 0, 0, 0, None, b"nope", None, 0, 4, []))
    assert consumer.stats.dead_lettered == 0 and consumer.stats.dead_letter_failures == 1


def test_the_dead_letter_metric_names_a_field_from_a_fixed_set() -> None:
    assert field_kind("data.gpus[0].index") == "data"
    assert field_kind("header ce_id") == "header"
    assert field_kind("anything-a-producer-chose") == "other" and field_kind(None) == "other"


async def test_a_tombstone_without_a_key_is_dead_lettered_with_an_empty_value() -> None:
    """Kafka clients refuse a record with neither key nor value; the letter says the original had none."""
    dlq = DeadLetters()
    consumer = _consumer(_never, dlq)
    await consumer.process(ConsumerRecord("myolo.node.samples", 0, 3, 0, 0, None, None, None, 0, 0, []))
    _, value, key, headers = dlq.sent[0]
    info = dead_letter_info(headers)
    assert (value, key, info["value"], info["field"]) == (b"", None, "none", "value")


async def test_dead_letter_log_lines_are_budgeted_and_say_what_they_held_back() -> None:
    clock = InstantClock()
    budget = Throttle(clock, window_s=10.0, burst=3)
    assert [budget.allow() for _ in range(5)] == [0, 0, 0, None, None]
    await clock.sleep(10.0)
    assert budget.allow() == 2 and budget.allow() == 0


class ScriptedKafka:
    """Stands in for AIOKafkaConsumer in ``run()``: hands out the given batches, then asks the consumer to stop.
    A commit stays open until ``release`` is set, as a slow broker's would."""

    def __init__(self, consumer: EventConsumer, batches: list[list[ConsumerRecord]]) -> None:
        self._consumer, self._batches = consumer, list(batches)
        self.release = asyncio.Event()
        self.commits: list[tuple[int, int]] = []  # (offset committed, records handled when it was sent)
        self.open_commits = 0
        self.stopped_with_open_commits: int | None = None

    def assignment(self) -> set:
        return {("myolo.node.samples", 0)}

    async def getmany(self, timeout_ms: int, max_records: int) -> dict:
        if not self._batches:
            await self._consumer.stop()
            return {}
        return {("myolo.node.samples", 0): self._batches.pop(0)}

    async def commit(self, offsets: dict) -> None:
        self.commits.append((next(iter(offsets.values())), self._consumer.stats.handled))
        self.open_commits += 1
        await self.release.wait()
        self.open_commits -= 1

    async def stop(self) -> None:
        self.stopped_with_open_commits = self.open_commits


async def test_a_batch_is_committed_while_the_next_is_handled_and_before_the_consumer_closes() -> None:
    events = [new_event(node_sample(gpus=1), "agent/x") for _ in range(4)]
    records = [_record(event, offset) for offset, event in enumerate(events)]
    kafka: ScriptedKafka

    async def handler(event, info):
        if info.offset == 2:  # the second batch: the first batch's commit is already out, still unanswered
            assert kafka.commits == [(2, 2)] and kafka.open_commits == 1
        if info.offset == 3:
            kafka.release.set()  # the broker answers

    consumer = _consumer(handler, DeadLetters())
    kafka = ScriptedKafka(consumer, [records[:2], records[2:]])
    consumer._consumer = kafka
    await asyncio.wait_for(consumer.run(), 10)  # a bound on a hang, were the commit awaited before handling on
    assert consumer.stats.handled == 4
    assert kafka.commits == [(2, 2), (4, 4)], "in order, each after its batch was handled"
    assert kafka.stopped_with_open_commits == 0, "the last commit is answered before the consumer closes"
