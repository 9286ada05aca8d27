"""Leadership from Kafka itself: the member of one consumer group that owns partition 0 of a one-partition
topic leads. No extra service: the group coordinator already does failure detection (session timeout),
and hands the partition to exactly one live member per generation.

Callbacks: ``on_elected(generation)`` when partition 0 is assigned to us (run as a task, so the rebalance is
not held up by the term's start-up), ``on_deposed()`` at once when it is revoked, before anyone else can be
given it (eager rebalancing revokes everywhere before assigning).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

from myolo.events.aiokafka_internals import group_generation
from myolo.events.settings import KafkaSettings
from myolo.events.topics import LEADER

log = structlog.get_logger("myolo.coordinator.leader")


class _Listener(ConsumerRebalanceListener):
    def __init__(self, elector: LeaderElector) -> None:
        self._e = elector

    async def on_partitions_revoked(self, revoked) -> None:
        if TopicPartition(LEADER, 0) in revoked:
            self._e._deposed()

    async def on_partitions_assigned(self, assigned) -> None:
        self._e.generation = self._e._generation()  # every member hears of each new generation, leader or not
        if TopicPartition(LEADER, 0) in assigned:
            self._e._elected()


class LeaderElector:
    def __init__(
        self,
        settings: KafkaSettings,
        *,
        group_id: str,
        instance_id: str,
        on_elected: Callable[[int], Awaitable[None]],
        on_deposed: Callable[[], None],
        session_timeout_ms: int = 6000,
        heartbeat_interval_ms: int = 1000,
    ) -> None:
        kw = settings.client_kwargs()
        kw["client_id"] = f"{kw.get('client_id', 'myolo')}-{instance_id}"
        self._kwargs = {
            **kw,
            "group_id": group_id,
            "enable_auto_commit": False,
            "auto_offset_reset": "latest",
            "session_timeout_ms": session_timeout_ms,
            "heartbeat_interval_ms": heartbeat_interval_ms,
            "rebalance_timeout_ms": session_timeout_ms,
        }
        self._on_elected = on_elected
        self._on_deposed = on_deposed
        self._consumer: AIOKafkaConsumer | None = None
        self._stopping = asyncio.Event()
        self._term_task: asyncio.Task | None = None
        self.holds_partition = False
        self.generation = -1  # the last group generation this member joined

    def _generation(self) -> int:
        return group_generation(self._consumer) if self._consumer is not None else -1

    def _elected(self) -> None:
        self.holds_partition = True
        generation = self._generation()
        log.info("partition 0 of the leader topic assigned: leading", generation=generation)
        self._term_task = asyncio.create_task(self._on_elected(generation))

    def _deposed(self) -> None:
        self.holds_partition = False
        if self._term_task is not None and not self._term_task.done():
            self._term_task.cancel()
        log.info("partition 0 of the leader topic revoked: stepping down")
        self._on_deposed()

    async def run(self) -> None:
        consumer = AIOKafkaConsumer(**self._kwargs)
        self._consumer = consumer
        await consumer.start()
        consumer.subscribe([LEADER], listener=_Listener(self))
        try:
            while not self._stopping.is_set():
                await consumer.getmany(timeout_ms=500)  # keeps the membership (and its heartbeats) alive
        finally:
            if self.holds_partition:
                self._deposed()
            await consumer.stop()  # leaves the group: a standby is elected without waiting for the session
            self._consumer = None

    async def stop(self) -> None:
        self._stopping.set()
