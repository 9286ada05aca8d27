"""Following a topic from the operator's machine (``myoloctl events tail``): its records as they arrive, each
as a document of where it is, the event it carries or why it is not one, and its dead-letter headers.

No consumer group: the partitions are assigned, so tailing never moves a group's offsets.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from myolo.events.aiokafka_internals import load_metadata
from myolo.events.codec import decode
from myolo.events.deadletter import dead_letter_info
from myolo.events.errors import InvalidEvent
from myolo.events.settings import KafkaSettings

POLL_S = 0.5


class TopicMissing(LookupError):
    """The topic to tail does not exist on the cluster."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic!r} does not exist")
        self.topic = topic


async def tail_records(
    settings: KafkaSettings,
    topic: str,
    *,
    from_beginning: bool = False,
    max_records: int | None = None,
    idle_timeout: float | None = None,
) -> AsyncIterator[ConsumerRecord]:
    """The topic's records in time order per poll, from its start or its end; ends after ``max_records`` or
    ``idle_timeout`` seconds without one (else never). :class:`TopicMissing` if there is no such topic."""
    consumer = AIOKafkaConsumer(**settings.client_kwargs(), enable_auto_commit=False)
    await consumer.start()
    try:
        parts = consumer.partitions_for_topic(topic) or await _partitions(consumer, topic)
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        if from_beginning:
            await consumer.seek_to_beginning(*tps)
        else:
            await consumer.seek_to_end(*tps)
        seen = 0
        idle = 0.0
        while max_records is None or seen < max_records:
            batch = await consumer.getmany(timeout_ms=int(POLL_S * 1000), max_records=100)
            if not batch:
                idle += POLL_S
                if idle_timeout is not None and idle >= idle_timeout:
                    break
                continue
            idle = 0.0
            for record in sorted((r for rs in batch.values() for r in rs), key=lambda r: r.timestamp):
                yield record
                seen += 1
                if max_records is not None and seen >= max_records:
                    break
    finally:
        await consumer.stop()


async def _partitions(consumer: AIOKafkaConsumer, topic: str) -> set[int]:
    await load_metadata(consumer, [topic])
    parts = consumer.partitions_for_topic(topic)
    if not parts:
        raise TopicMissing(topic)
    return parts


def record_doc(record: ConsumerRecord) -> dict[str, Any]:
    """Topic, partition, offset and key, then the event's id, type, source, time, data and extensions, or
    ``invalid`` with the reason it does not decode; ``dead_letter`` with its headers when it was dead-lettered."""
    where = {"topic": record.topic, "partition": record.partition, "offset": record.offset}
    dlq = dead_letter_info(record.headers)
    doc: dict[str, Any]
    try:
        event = decode(record.value, record.headers, record.key)
        doc = {
            **where,
            "key": event.key,
            "id": event.id,
            "type": event.type,
            "source": event.source,
            "time": event.time,
            "data": event.data,
        }
        if event.extensions:
            doc["extensions"] = event.extensions
    except InvalidEvent as exc:
        doc = {**where, "key": (record.key or b"").decode(errors="replace"), "invalid": str(exc)}
    if dlq:
        doc["dead_letter"] = dlq
    return doc
