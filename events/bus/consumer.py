"""The event consumer: a consumer group, at-least-once, deduplicated, never killed by a bad record.

Offsets are committed only after every record of a batch was handled or dead-lettered, so a crash replays
rather than loses; replays (and producer retries from before idempotence) are dropped by event id within a
bounded window. A record that fails to decode, validate, verify, or whose handler keeps failing goes to the
dead-letter topic with the reason, and consumption goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from events.bus.dedupe import RecentIds
from events.bus.producer import EventProducer
from events.clock import Clock, SystemClock
from events.codec import DEFAULT_MAX_BYTES, decode
from events.deadletter import RecordInfo, count, dead_letter_headers
from events.envelope import Event, rfc3339
from events.errors import InvalidEvent
from events.settings import KafkaSettings
from events.signing import Verifier
from events.topics import BY_NAME, DEAD_LETTER
from events.tracing import process_span, tracing_enabled

Handler = Callable[[Event, RecordInfo], Awaitable[None]]
log = structlog.get_logger("myolo.events.consumer")


@dataclass
class ConsumerStats:
    consumed: int = 0
    handled: int = 0
    duplicates: int = 0
    skipped: int = 0
    dead_lettered: int = 0
    handler_retries: int = 0


class EventConsumer:
    """Consume CloudEvents from ``topics`` in group ``group_id`` and hand each valid, new one to ``handler``.

    ``verifier`` (for command topics) rejects unsigned or forged events. ``accept_key`` skips, before any
    decoding, records keyed for someone else (an agent reads only its own node's commands). ``handler_attempts`` bounds how often
    a failing handler is retried before the record is dead-lettered, so one poisonous record cannot stall a
    partition forever.
    """

    def __init__(
        self,
        settings: KafkaSettings,
        topics: list[str],
        group_id: str,
        handler: Handler,
        *,
        dead_letters: EventProducer,
        verifier: Verifier | None = None,
        dedupe_window: int = 100_000,
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
        self._seen = RecentIds(dedupe_window)
        self._allowed = {t: set(BY_NAME[t].types) for t in topics if t in BY_NAME and BY_NAME[t].types}
        self._max_bytes = max_bytes
        self._attempts = handler_attempts
        self._clock = clock or SystemClock()
        self._max_records = max_records
        self._accept_key = accept_key
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
        await self._consumer.start()

    async def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        """Consume until :meth:`stop`. Starts the consumer if needed, and always closes it."""
        if self._consumer is None:
            await self.start()
        consumer = self._consumer
        assert consumer is not None
        try:
            while not self._stopping.is_set():
                batches = await consumer.getmany(timeout_ms=200, max_records=self._max_records)
                if consumer.assignment():
                    self.ready.set()
                if not batches:
                    continue
                offsets: dict[TopicPartition, int] = {}
                for tp, records in batches.items():
                    for record in records:
                        await self.process(record)
                    offsets[tp] = records[-1].offset + 1
                await consumer.commit(offsets)
        finally:
            self._consumer = None
            await consumer.stop()

    async def process(self, record: ConsumerRecord) -> None:
        """Decode, check, deduplicate and handle one record; dead-letter it when it cannot be accepted."""
        self.stats.consumed += 1
        if self._accept_key is not None and not self._accept_key(record.key):
            self.stats.skipped += 1  # another entity's record on a shared partition: not ours to judge
            return
        try:
            event = decode(record.value, record.headers, record.key, max_bytes=self._max_bytes)
            allowed = self._allowed.get(record.topic)
            if allowed and event.type not in allowed:
                raise InvalidEvent(f"event type {event.type!r} does not belong on topic {record.topic!r}", "type")
            if self._verifier is not None:
                self._verifier.verify(event)
        except InvalidEvent as exc:
            await self._dead_letter(record, exc)
            return
        if event.id in self._seen:
            self.stats.duplicates += 1
            return
        info = RecordInfo(record.topic, record.partition, record.offset, record.timestamp, record.key)
        try:
            await self._handle(event, info)
        except Exception as exc:  # a handler bug must not kill the consumer: retry, then dead-letter
            if not await self._retry(event, info, exc):
                await self._dead_letter(record, InvalidEvent(f"handler failed: {type(exc).__name__}: {exc}", "handler"))
                return
        self._seen.add(event.id)
        self.stats.handled += 1

    async def _handle(self, event: Event, info: RecordInfo) -> None:
        if tracing_enabled():
            with process_span(event, info.topic):
                await self._handler(event, info)
        else:
            await self._handler(event, info)

    async def _retry(self, event: Event, info: RecordInfo, first: Exception) -> bool:
        """Retry a failed handler with backoff; True once it succeeded, False after the last attempt."""
        error: Exception = first
        for attempt in range(1, self._attempts):
            self.stats.handler_retries += 1
            log.warning("handler failed, retrying", event_id=event.id, attempt=attempt, error=str(error))
            await self._clock.sleep(0.05 * 2**attempt)
            try:
                await self._handle(event, info)
                return True
            except Exception as exc:
                error = exc
        return False

    async def _dead_letter(self, record: ConsumerRecord, error: InvalidEvent) -> None:
        info = RecordInfo(record.topic, record.partition, record.offset, record.timestamp, record.key)
        headers = dead_letter_headers(record.headers, info, error, self.group_id, rfc3339(self._clock.now()))
        await self._dlq.send_raw(DEAD_LETTER, record.value, record.key, headers)
        self.stats.dead_lettered += 1
        count(error, record.topic)
        log.warning(
            "record dead-lettered",
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            field=error.field,
            reason=error.reason,
        )
