"""A record whose dead letter cannot be written is never committed past: nothing is lost silently.

The consumer reads a good record, a bad one and a good one from the real broker while its dead-letter sink
is unreachable (as when the broker is away for the producer). It handles the first, then holds the partition
and retries the dead letter; stopped, it commits only the first. Started again in the same group with a
working sink, it dead-letters the bad record and handles the last good one, and nothing is handled twice.
"""

from __future__ import annotations

import uuid

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaConnectionError

from myolo.events.bus import EventConsumer
from myolo.events.examples import node_sample
from tests.integration.events.conftest import Running, dead_letters_from, wait_until


class Unreachable:
    """A dead-letter sink whose broker is away."""

    def __init__(self) -> None:
        self.attempts = 0

    async def send_raw(self, topic, value, key, headers):
        self.attempts += 1
        raise KafkaConnectionError("broker away")


async def committed(settings, group: str, tp: TopicPartition) -> int | None:
    reader = AIOKafkaConsumer(**settings.client_kwargs(), group_id=group, enable_auto_commit=False)
    await reader.start()
    try:
        return await reader.committed(tp)
    finally:
        await reader.stop()


async def test_a_record_whose_dead_letter_cannot_be_written_is_not_committed(settings, producer, fresh_topic) -> None:
    topic = await fresh_topic(1)
    group = f"g-{uuid.uuid4().hex}"
    first = await producer.send(node_sample("before", gpus=1), topic)
    await producer.send_raw(topic, b"not json", b"poison", [])
    last = await producer.send(node_sample("after", gpus=1), topic)
    handled: list[str] = []

    async def handler(event, info) -> None:
        handled.append(event.id)

    sink = Unreachable()
    stuck = Running(EventConsumer(settings, [topic], group, handler, dead_letters=sink))
    try:
        await wait_until(lambda: handled == [first.id] and sink.attempts >= 2, what="held at the poison record")
    finally:
        await stuck.stop()
    assert handled == [first.id] and stuck.consumer.stats.dead_lettered == 0
    assert stuck.consumer.stats.dead_letter_failures >= 2
    assert await committed(settings, group, TopicPartition(topic, 0)) == 1, "committed up to the poison, not past"

    again = Running(EventConsumer(settings, [topic], group, handler, dead_letters=producer))
    try:
        await wait_until(lambda: len(handled) == 2, what="the record after the poison")
        await wait_until(lambda: again.consumer.stats.dead_lettered == 1, what="the poison dead-lettered")
    finally:
        await again.stop()
    assert handled == [first.id, last.id], "nothing lost, nothing handled twice"
    [(key, value, _, info)] = await dead_letters_from(settings, topic, 1)
    assert (key, value, info["offset"], info["field"]) == ("poison", b"not json", "1", "value")
