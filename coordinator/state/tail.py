"""Reading the state topics: from the beginning to the end at start, then following them.

Every coordinator follows the state (not only the leader), so a standby's view already holds every cordon
and command intent when it is elected, and its reads show what the leader decided. ``caught_up`` is the
"read them to the end before acting" barrier: it takes the end offsets at the moment of the call and waits
until everything before them has been applied.

Only records sealed by the coordinators are applied (:mod:`myolo.coordinator.state.seal`): one unsealed or sealed
wrongly is skipped, counted in ``forged`` and logged with its topic, key and reason, whatever it says.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import msgspec
import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition

from myolo.coordinator.state.codec import BadStateRecord, StateCodec, record_kind
from myolo.coordinator.state.seal import ForgedStateRecord, Stale, StateKeys
from myolo.events.aiokafka_internals import load_metadata
from myolo.events.settings import KafkaSettings

# (topic, key, record or None for a tombstone, kind)
Apply = Callable[[str, str, msgspec.Struct | None, str], None]

log = structlog.get_logger("myolo.coordinator.state")


class StateTail:
    """Follows ``topics`` from offset 0 and hands each record to ``apply`` (synchronously, in log order)."""

    def __init__(
        self, settings: KafkaSettings, topics: list[str], codec: StateCodec, apply: Apply, keys: StateKeys
    ) -> None:
        self._codec = codec
        self._keys = keys
        self._stale: Stale = {}
        self._kwargs = {**settings.client_kwargs(), "enable_auto_commit": False, "group_id": None}
        self._topics = topics
        self._apply = apply
        self._consumer: AIOKafkaConsumer | None = None
        self._parts: list[TopicPartition] = []
        self._stopping = asyncio.Event()
        self._progress = asyncio.Event()
        self.applied = 0
        self.skipped = 0
        self.forged = 0

    async def start(self) -> None:
        consumer = AIOKafkaConsumer(**self._kwargs)
        await consumer.start()
        await load_metadata(consumer, self._topics)  # an assigned consumer knows no partitions until asked
        parts: list[TopicPartition] = []
        for topic in self._topics:
            found = consumer.partitions_for_topic(topic)
            if not found:
                await consumer.stop()
                raise RuntimeError(f"state topic {topic!r} does not exist (run `myoloctl local up` or ensure_topics)")
            parts += [TopicPartition(topic, p) for p in sorted(found)]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        self._consumer, self._parts = consumer, parts

    async def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        if self._consumer is None:
            await self.start()
        consumer = self._consumer
        assert consumer is not None
        try:
            while not self._stopping.is_set():
                batches = await consumer.getmany(timeout_ms=200, max_records=1000)
                for records in batches.values():
                    for r in records:
                        self._one(r.topic, r.key, r.value, r.headers)
                self._progress.set()
        finally:
            self._consumer = None
            await consumer.stop()

    def _one(self, topic: str, key: bytes | None, value: bytes | None, headers) -> None:
        """Apply one record; a record that cannot be read or applied is skipped, loudly, and never stops us."""
        kind = record_kind(headers) or ""
        try:
            if key is None:
                raise BadStateRecord("record has no key")
            current = self._keys.check(topic, key, kind, value, headers)
            record = None if value is None else self._codec.decode(value, headers)
            self._apply(topic, key.decode(errors="replace"), record, kind)
            self.applied += 1
            if current:
                self._stale.pop((topic, key), None)
            else:
                self._stale[(topic, key)] = (kind, value)
        except ForgedStateRecord as exc:
            self.forged += 1
            log.error("forged state record skipped", topic=topic, key=key, kind=kind, reason=str(exc))
        except BadStateRecord as exc:
            self.skipped += 1
            log.error("state record skipped", topic=topic, key=key, reason=str(exc))
        except Exception as exc:  # a component's bug on one record must not stop every coordinator
            self.skipped += 1
            log.exception("state record not applied", topic=topic, key=key, kind=kind, error=repr(exc))

    def stale(self) -> Stale:
        """The records applied whose seal is by a previous key (a rotation): the leader seals them again."""
        return dict(self._stale)

    async def caught_up(self, timeout_s: float = 60.0) -> None:
        """Wait until every record written before this call has been applied."""
        consumer = self._consumer
        if consumer is None:
            raise RuntimeError("StateTail is not running")
        end = await consumer.end_offsets(self._parts)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            behind = [tp for tp in self._parts if await consumer.position(tp) < end[tp]]
            if not behind:
                return
            if loop.time() > deadline:
                raise TimeoutError(f"state topics not read to the end after {timeout_s:.0f} s: {behind}")
            self._progress.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._progress.wait(), 1.0)  # woken by the reader, not timed behaviour
