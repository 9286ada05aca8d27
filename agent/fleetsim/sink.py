"""Where the simulator's records go: a real Kafka producer, or a list (unit tests).

The Kafka sink hands pre-encoded bytes straight to aiokafka with the same producer settings as every agent
(idempotent, acks=all, lz4, short linger) and with each node's partition computed once, the way aiokafka's
default partitioner would (murmur2 of the key): hashing every key again in pure Python each second would be
a measurable share of the simulator's own cost.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner

from myolo.events.bus.producer import DEFAULT_PRODUCER_OPTIONS
from myolo.events.settings import KafkaSettings

Headers = list[tuple[str, bytes]]


class RecordSink(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send(
        self, topic: str, value: bytes, key: bytes, headers: Headers, partition: int | None
    ) -> asyncio.Future[Any]:
        """Enqueue one record; the future resolves when the broker acknowledged it."""

    async def partitions(self, topic: str) -> int:
        """How many partitions ``topic`` has."""

    async def flush(self) -> None: ...


def partition_of(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner puts ``key`` on (what an agent's own producer would pick)."""
    return DefaultPartitioner()(key, list(range(partitions)), list(range(partitions)))


class KafkaSink:
    def __init__(self, settings: KafkaSettings, **overrides: Any) -> None:
        self._options = {**DEFAULT_PRODUCER_OPTIONS, **settings.client_kwargs(), **overrides}
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        self._producer = AIOKafkaProducer(**self._options)
        await self._producer.start()

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None

    async def send(
        self, topic: str, value: bytes, key: bytes, headers: Headers, partition: int | None
    ) -> asyncio.Future[Any]:
        assert self._producer is not None, "KafkaSink.start() was not called"
        return await self._producer.send(topic, value=value, key=key, headers=headers, partition=partition)

    async def partitions(self, topic: str) -> int:
        assert self._producer is not None, "KafkaSink.start() was not called"
        found = await self._producer.partitions_for(topic)
        return len(found)

    async def flush(self) -> None:
        if self._producer is not None:
            await self._producer.flush()


@dataclass
class SentRecord:
    topic: str
    value: bytes
    key: bytes
    headers: Headers
    partition: int | None
    at: float  # time.perf_counter() when handed over


@dataclass
class MemorySink:
    """Keeps every record (tests of rate, spread, shape and faults without a broker)."""

    n_partitions: int = 12
    records: list[SentRecord] = field(default_factory=list)
    clock_now: Any = None  # a callable giving the time to stamp (the test's SimClock.monotonic)

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def send(
        self, topic: str, value: bytes, key: bytes, headers: Headers, partition: int | None
    ) -> asyncio.Future[Any]:
        at = self.clock_now() if self.clock_now is not None else time.perf_counter()
        self.records.append(SentRecord(topic, value, key, headers, partition, at))
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut

    async def partitions(self, topic: str) -> int:
        return self.n_partitions

    async def flush(self) -> None:
        pass
