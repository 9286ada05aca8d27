"""Fixtures for tests of the bus against the real session broker (see tests/conftest.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from events.bus import EventConsumer, EventProducer
from events.deadletter import dead_letter_info
from events.settings import KafkaSettings
from events.topics import CATALOGUE, DEAD_LETTER, Topic, ensure_topics

_created_catalogue = False


@pytest.fixture
async def settings(kafka) -> KafkaSettings:
    """Settings for the session broker, with the catalogue topics present."""
    global _created_catalogue
    s = KafkaSettings(bootstrap=kafka.bootstrap, client_id="myolo-test")
    if not _created_catalogue:
        await ensure_topics(s.client_kwargs(), CATALOGUE)
        _created_catalogue = True
    return s


@pytest.fixture
async def fresh_topic(settings: KafkaSettings) -> Callable:
    """Make a topic of our own for one test, so tests do not see each other's records."""

    async def make(partitions: int = 3) -> str:
        name = f"test.{uuid.uuid4().hex[:10]}"
        await ensure_topics(settings.client_kwargs(), (Topic(name, partitions, "test"),))
        return name

    return make


@pytest.fixture
async def producer(settings: KafkaSettings) -> AsyncIterator[EventProducer]:
    async with EventProducer(settings, source="test/producer") as p:
        yield p


async def wait_until(cond: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    """Poll for something the broker or another process will do (I/O), with a deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.05)


class Running:
    """An EventConsumer running in a task, stopped at the end of the test."""

    def __init__(self, consumer: EventConsumer) -> None:
        self.consumer = consumer
        self.task = asyncio.create_task(consumer.run())

    async def stop(self) -> None:
        await self.consumer.stop()
        await asyncio.wait_for(self.task, 30)


async def dead_letters_from(settings, source_topic: str, expected: int) -> list:
    """Read the dead-letter topic from the start: [(key, original value, headers, our dlq info)]."""
    consumer = AIOKafkaConsumer(**settings.client_kwargs(), enable_auto_commit=False)
    await consumer.start()
    out: list = []
    try:
        parts = [TopicPartition(DEAD_LETTER, p) for p in consumer.partitions_for_topic(DEAD_LETTER) or {0, 1, 2}]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        end = await consumer.end_offsets(parts)
        while [tp for tp in parts if await consumer.position(tp) < end[tp]]:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for r in records:
                    info = dead_letter_info(r.headers)
                    if info.get("topic") == source_topic:
                        out.append((r.key.decode(), r.value, r.headers, info))
    finally:
        await consumer.stop()
    assert len(out) == expected
    return out
