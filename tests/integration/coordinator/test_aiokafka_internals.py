"""The two private things of aiokafka the coordinator reads (events/aiokafka_internals.py), against
the real broker: if an aiokafka upgrade moves them, this fails loudly instead of an epoch silently being -1."""

from __future__ import annotations

import uuid

from aiokafka import AIOKafkaConsumer, TopicPartition

from myolo.coordinator.commands.records import STATE_COMMANDS
from myolo.events.aiokafka_internals import group_generation, load_metadata
from myolo.events.topics import LEADER
from tests.support.helpers import wait_until


async def test_group_generation_is_read_after_joining(settings) -> None:
    consumer = AIOKafkaConsumer(**settings.client_kwargs(), group_id=f"gen-{uuid.uuid4().hex[:8]}")
    assert group_generation(consumer) == -1  # not started: no group yet
    await consumer.start()
    try:
        consumer.subscribe([LEADER])
        await wait_until(lambda: bool(consumer.assignment()) or None, 30, "a partition of the leader topic")
        await consumer.getmany(timeout_ms=100)
        await wait_until(lambda: group_generation(consumer) >= 1, 30, "a generation >= 1 once joined")
    finally:
        await consumer.stop()


async def test_metadata_is_loaded_for_an_assigned_consumer(settings) -> None:
    consumer = AIOKafkaConsumer(**settings.client_kwargs(), group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        await load_metadata(consumer, [STATE_COMMANDS])
        parts = consumer.partitions_for_topic(STATE_COMMANDS)
        assert parts and len(parts) >= 1
        consumer.assign([TopicPartition(STATE_COMMANDS, p) for p in parts])
    finally:
        await consumer.stop()


async def test_metadata_updates_of_a_real_client_are_paced(settings) -> None:
    """The pace sits on the path aiokafka's own synchronizer takes: a forced update right after another
    waits for the rest of the client's back-off before it starts."""
    from aiokafka import AIOKafkaProducer

    from myolo.events.aiokafka_internals import pace_metadata_updates

    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    producer = AIOKafkaProducer(**settings.client_kwargs(), retry_backoff_ms=5000)
    pace_metadata_updates(producer, monotonic=lambda: 0.0, sleep=sleep)  # time stands still: always too soon
    await producer.start()  # the bootstrap's update is the first
    try:
        assert await producer.client.force_metadata_update()
        assert await producer.client.force_metadata_update()
    finally:
        await producer.stop()
    assert waits and all(w == 5.0 for w in waits), waits  # every update after the first waited
