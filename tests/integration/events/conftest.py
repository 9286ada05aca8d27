"""Fixtures for tests of the bus against the real session broker (see tests/conftest.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable

import pytest

from myolo.events.bus import EventConsumer, EventProducer
from myolo.events.deadletter import dead_letter_info
from myolo.events.settings import KafkaSettings
from myolo.events.topics import DEAD_LETTER, Topic, ensure_topics
from tests.support.helpers import read_topic, wait_until  # noqa: F401 (wait_until: re-exported for the tests here)


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
    out = [
        (r.key.decode() if r.key is not None else None, r.value, r.headers, info)
        for r in await read_topic(settings, DEAD_LETTER)
        if (info := dead_letter_info(r.headers)).get("topic") == source_topic
    ]
    assert len(out) == expected
    return out
