"""The event consumer: a consumer group, at-least-once, deduplicated, never killed by a bad record.

Offsets are committed only after every record of a batch was handled or dead-lettered, so a crash replays
rather than loses; a batch's commit runs while the next batch is handled (one commit in flight, in order,
awaited before the consumer closes), so the broker's round trip does not stall ingest. Replays (and producer
retries from before idempotence) are dropped by event id within a bounded window. A record that fails to decode, validate, verify, whatever the exception, or whose handler
keeps failing, goes to the dead-letter topic with the reason, and consumption goes on. Only cancellation and
the interpreter's exit (``CancelledError``, ``KeyboardInterrupt``, ``SystemExit``) pass through.

When the dead letter itself cannot be written (the broker is away), the consumer does not move past the
record: it retries with backoff, holding that partition, because committing past it would lose it silently.
If it is stopped meanwhile, it commits only what came before the record and leaves; the record is read
again on the next start. A letter the broker refuses as too large is sent without the original value.
A record the Kafka client itself cannot parse is stepped over (see :mod:`myolo.events.bus.unreadable`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError, MessageSizeTooLargeError, RecordTooLargeError

from myolo.common.clock import Clock, SystemClock
from myolo.events.aiokafka_internals import pace_metadata_updates
from myolo.events.bus.dedupe import RecentIds
from myolo.events.bus.unreadable import PARSE_ERRORS, step_past_unreadable
from myolo.events.codec import DEFAULT_MAX_BYTES, decode
from myolo.events.deadletter import (
    DeadLetter,
    DeadLetterSink,
    RecordInfo,
    count,
    dead_letter,
    field_kind,
    without_original,
)
from myolo.events.envelope import Event, rfc3339
from myolo.events.errors import InvalidEvent
from myolo.events.limits import DEDUPE_WINDOW_BYTES, Throttle, cut
from myolo.events.settings import KafkaSettings
from myolo.events.signing import Verifier
from myolo.events.topics import BY_NAME, DEAD_LETTER
from myolo.events.tracing import process_span, tracing_enabled

Handler = Callable[[Event, RecordInfo], Awaitable[None]]
log = structlog.get_logger("myolo.events.consumer")
PASS_THROUGH = (asyncio.CancelledError, KeyboardInterrupt, SystemExit, GeneratorExit)
"""Never taken for a bad record or a failed handler: they mean "stop", and stopping must work."""
_TOO_LARGE = (MessageSizeTooLargeError, RecordTooLargeError)
DEAD_LETTER_BACKOFF_MAX_S = 5.0


class DeadLetterUnsent(Exception):
    """The consumer was stopped while a dead letter could not be written: the record is not committed."""


def passes_through(exc: BaseException) -> bool:
    """Whether ``exc`` is (or, in a group, holds) cancellation or exit, which must never be swallowed."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(PASS_THROUGH) is not None
    return isinstance(exc, PASS_THROUGH)


def _describe(exc: BaseException) -> str:
    try:
        return cut(f"{type(exc).__name__}: {exc}")
    except Exception:  # a __str__ that fails is one more hostile input
        return type(exc).__name__


async def _settled(commit: asyncio.Task | None) -> None:
    """Wait for a commit in flight, so commits stay one at a time and in order (and none is left behind)."""
    if commit is not None:
        await asyncio.shield(commit)


@dataclass(frozen=True)
class FetchState:
    """``assigned`` partitions; ``last_answer``: when the broker last answered a fetch (epoch seconds, None:
    never); ``behind_since``: the time of the newest record taken from a partition that still has more
    (None: caught up), so ``now - behind_since`` is roughly how far behind the consumer is."""

    assigned: int
    last_answer: float | None
    behind_since: float | None


@dataclass
class ConsumerStats:
    consumed: int = 0
    handled: int = 0
    duplicates: int = 0
    skipped: int = 0
    dead_lettered: int = 0
    handler_retries: int = 0
    dead_letter_failures: int = 0
    commit_failures: int = 0
    # by (topic, the first word of the field that was wrong: data, header, value, ...): a bounded set
    dead_lettered_by: dict[tuple[str, str], int] = field(default_factory=dict)


class EventConsumer:
    """Consume CloudEvents from ``topics`` in group ``group_id`` and hand each valid, new one to ``handler``.

    ``verifier`` (for command topics) rejects unsigned or forged events. ``accept_key`` skips, before any
    decoding, records keyed for someone else (an agent reads only its own node's commands).
    ``handler_attempts`` bounds how often a failing handler is retried before the record is dead-lettered,
    so one poisonous record cannot stall a partition forever. The duplicate window holds at most
    ``dedupe_window`` ids and ``dedupe_window_bytes`` of memory.
    """

    def __init__(
        self,
        settings: KafkaSettings,
        topics: list[str],
        group_id: str,
        handler: Handler,
        *,
        dead_letters: DeadLetterSink,
        verifier: Verifier | None = None,
        dedupe_window: int | None = None,
        dedupe_window_bytes: int = DEDUPE_WINDOW_BYTES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        handler_attempts: int = 3,
        clock: Clock | None = None,
        auto_offset_reset: str = "earliest",
        max_records: int = 500,
        accept_key: Callable[[bytes | None], bool] | None = None,
    ) -> None:
        self.topics = topics
        self.group_id = group_id
        self.stats = ConsumerStats()
        self._handler = handler
        self._dlq = dead_letters
        self._verifier = verifier
        self._fetched: dict[TopicPartition, tuple[int, float]] = {}  # next offset, time of the last record taken
        self._seen = RecentIds(dedupe_window or settings.dedupe_window_ids, dedupe_window_bytes)
        self._allowed = {t: set(BY_NAME[t].types) for t in topics if t in BY_NAME and BY_NAME[t].types}
        self._max_bytes = max_bytes
        self._attempts = handler_attempts
        self._clock = clock or SystemClock()
        self._max_records = max_records
        self._accept_key = accept_key
        self._log_budget = Throttle(self._clock)
        self._kwargs = {
            **settings.client_kwargs(),
            "group_id": group_id,
            "enable_auto_commit": False,
            "auto_offset_reset": auto_offset_reset,
            "max_partition_fetch_bytes": max(max_bytes * 2, 1 << 20),
        }
        self._consumer: AIOKafkaConsumer | None = None
        self._stopping = asyncio.Event()
        self.ready = asyncio.Event()

    async def start(self) -> None:
        self._consumer = AIOKafkaConsumer(*self.topics, **self._kwargs)
        pace_metadata_updates(self._consumer)
        await self._consumer.start()

    async def stop(self) -> None:
        self._stopping.set()

    def fetch_state(self) -> FetchState:
        """How well this consumer hears the broker, on the wall clock (aiokafka's own timestamps): for a
        reader to tell "nobody sends" from "the broker does not answer" or "we are far behind"."""
        consumer = self._consumer
        if consumer is None:
            return FetchState(assigned=0, last_answer=None, behind_since=None)
        parts = consumer.assignment()
        answers = [t for t in (consumer.last_poll_timestamp(tp) for tp in parts) if t]
        behind_since: float | None = None
        for tp in parts:
            high, fetched = consumer.highwater(tp), self._fetched.get(tp)
            if high is not None and fetched is not None and high > fetched[0]:
                behind_since = fetched[1] if behind_since is None else min(behind_since, fetched[1])
        return FetchState(
            assigned=len(parts), last_answer=max(answers) / 1000 if answers else None, behind_since=behind_since
        )

    def partition_lag(self) -> dict[tuple[str, int], int]:
        """Records each assigned partition has that this consumer has not fetched yet (high watermark minus the
        next offset it takes), as far as the last fetch told; a partition not fetched from yet is left out."""
        consumer = self._consumer
        if consumer is None:
            return {}
        out = {}
        for tp in consumer.assignment():
            high, fetched = consumer.highwater(tp), self._fetched.get(tp)
            if high is not None and fetched is not None:
                out[(tp.topic, tp.partition)] = max(0, high - fetched[0])
        return out

    def _note_fetched(self, batches: dict[TopicPartition, list[ConsumerRecord]]) -> None:
        for tp, records in batches.items():
            last = records[-1]
            self._fetched[tp] = (last.offset + 1, (last.timestamp or 0) / 1000)

    async def run(self) -> None:
        """Consume until :meth:`stop`. Starts the consumer if needed, and always closes it."""
        if self._consumer is None:
            await self.start()
        consumer = self._consumer
        assert consumer is not None
        committing: asyncio.Task | None = None  # the previous batch's commit, running while this batch is handled
        try:
            while not self._stopping.is_set():
                try:
                    batches = await consumer.getmany(timeout_ms=200, max_records=self._max_records)
                except PARSE_ERRORS as exc:
                    log.warning("the Kafka client cannot read a record; stepping over it", error=_describe(exc))
                    committing = await _settled(committing)
                    try:
                        await step_past_unreadable(
                            consumer, self.process, self._dead_letter, partial(self._commit, consumer)
                        )
                    except DeadLetterUnsent:
                        return
                    continue
                if consumer.assignment():
                    self.ready.set()
                if not batches:
                    continue
                self._note_fetched(batches)
                offsets: dict[TopicPartition, int] = {}
                try:
                    for tp, records in batches.items():
                        for record in records:
                            await self.process(record)
                            offsets[tp] = record.offset + 1
                except DeadLetterUnsent:
                    log.warning("stopped with a dead letter unsent; its record is read again on the next start")
                    return
                finally:
                    if offsets:
                        committing = await _settled(committing)
                        committing = asyncio.create_task(self._commit(consumer, offsets))
                        for _ in range(3):  # aiokafka's commit reaches the socket through a shielded task
                            await asyncio.sleep(0)  # a few loop turns: it (and a waiting fetch) send their requests
        finally:
            self._consumer = None
            await _settled(committing)
            await consumer.stop()

    async def _commit(self, consumer: AIOKafkaConsumer, offsets: dict[TopicPartition, int]) -> None:
        """A failed commit loses nothing: the records come again (to us or the partition's new owner) and
        their ids are known; so it is counted and logged, and consumption goes on."""
        try:
            await consumer.commit(offsets)
        except (CommitFailedError, KafkaError) as exc:
            self.stats.commit_failures += 1
            log.warning("offsets not committed; the records will be delivered again", error=_describe(exc))

    async def process(self, record: ConsumerRecord) -> None:
        """Decode, check, deduplicate and handle one record; dead-letter it when it cannot be accepted.

        Returns once the record is handled, skipped, a duplicate, or dead-lettered; raises only what
        :func:`passes_through`, or :class:`DeadLetterUnsent` when stopped with the dead letter unwritten."""
        self.stats.consumed += 1
        try:
            if self._accept_key is not None and not self._accept_key(record.key):
                self.stats.skipped += 1  # another entity's record on a shared partition: not ours to judge
                return
            event = self._accept(record)
        except BaseException as exc:
            if passes_through(exc):
                raise
            error = (
                exc
                if isinstance(exc, InvalidEvent)
                else InvalidEvent(f"cannot accept the record: {_describe(exc)}", "value")
            )
            await self._dead_letter(record, error)
            return
        if event.id in self._seen:
            self.stats.duplicates += 1
            return
        info = RecordInfo(record.topic, record.partition, record.offset, record.timestamp, record.key)
        try:
            await self._handle(event, info)
        except BaseException as exc:  # a handler bug must not kill the consumer: retry, then dead-letter
            if passes_through(exc):
                raise
            if not await self._retry(event, info, exc):
                await self._dead_letter(record, InvalidEvent(f"handler failed: {_describe(exc)}", "handler"))
                return
        self._seen.add(event.id)
        self.stats.handled += 1

    def _accept(self, record: ConsumerRecord) -> Event:
        event = decode(record.value, record.headers, record.key, max_bytes=self._max_bytes)
        allowed = self._allowed.get(record.topic)
        if allowed and event.type not in allowed:
            raise InvalidEvent(f"event type {event.type!r} does not belong on topic {record.topic!r}", "type")
        if self._verifier is not None:
            self._verifier.verify(event)
        return event

    async def _handle(self, event: Event, info: RecordInfo) -> None:
        if tracing_enabled():
            with process_span(event, info.topic):
                await self._handler(event, info)
        else:
            await self._handler(event, info)

    async def _retry(self, event: Event, info: RecordInfo, first: BaseException) -> bool:
        """Retry a failed handler with backoff; True once it succeeded, False after the last attempt."""
        error = first
        for attempt in range(1, self._attempts):
            self.stats.handler_retries += 1
            log.warning("handler failed, retrying", event_id=event.id, attempt=attempt, error=_describe(error))
            await self._clock.sleep(0.05 * 2**attempt)
            try:
                await self._handle(event, info)
                return True
            except BaseException as exc:
                if passes_through(exc):
                    raise
                error = exc
        return False

    async def _dead_letter(self, record: ConsumerRecord, error: InvalidEvent) -> None:
        """Write the dead letter, retrying until the broker takes it; see the module's docstring."""
        info = RecordInfo(record.topic, record.partition, record.offset, record.timestamp, record.key)
        when = rfc3339(self._clock.now())
        letter = dead_letter(record.value, record.key, record.headers, info, error, self.group_id, when)
        await self._send_dead_letter(letter)
        self.stats.dead_lettered += 1
        by = (record.topic, field_kind(error.field))
        self.stats.dead_lettered_by[by] = self.stats.dead_lettered_by.get(by, 0) + 1
        count(error, record.topic)
        self._log_budget.warn(
            log,
            "record dead-lettered",
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            field=cut(error.field or ""),
            reason=cut(error.reason),
        )

    async def _send_dead_letter(self, letter: DeadLetter) -> None:
        attempt, reduced = 0, False
        while True:
            try:
                await self._dlq.send_raw(DEAD_LETTER, letter.value, letter.key, letter.headers)
                return
            except BaseException as exc:
                if passes_through(exc):
                    raise
                if isinstance(exc, (*_TOO_LARGE, TypeError, ValueError, AssertionError)) and not reduced:
                    letter, reduced = without_original(letter, _describe(exc)), True  # never sendable as it was
                    continue
                attempt += 1
                self.stats.dead_letter_failures += 1
                log.error("dead letter not written; holding the partition", attempt=attempt, error=_describe(exc))
                if self._stopping.is_set():
                    raise DeadLetterUnsent(_describe(exc)) from exc
                await self._clock.sleep(min(DEAD_LETTER_BACKOFF_MAX_S, 0.1 * 2**attempt))
