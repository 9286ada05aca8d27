"""Stepping over a record the Kafka client itself cannot parse, so it cannot stop a consumer either.

aiokafka decodes header names as UTF-8 while it unpacks a fetched batch; a record with any other bytes there
raises ``UnicodeDecodeError`` out of ``getmany``, loses the records unpacked before it in that fetch, and
raises again on every later fetch. When that happens the consumer reads each assigned partition one record
at a time from its position (so the position shows where parsing stops): records that read are processed as
usual; at a record that does not, a stand-in is dead-lettered (no value or headers: none could be read) with
the reason, and the partition is moved one past it. The client parses a whole batch to reach any record in
it, so the records after a bad one in the same batch are unreadable too and are dead-lettered the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from myolo.events.errors import InvalidEvent
from myolo.events.limits import cut

Process = Callable[[ConsumerRecord], Awaitable[None]]
DeadLetter = Callable[[ConsumerRecord, InvalidEvent], Awaitable[None]]
Commit = Callable[[dict[TopicPartition, int]], Awaitable[None]]
PARSE_ERRORS = (ValueError,)
"""What aiokafka raises for a record it cannot unpack (``UnicodeDecodeError`` is a ``ValueError``)."""


async def step_past_unreadable(
    consumer: AIOKafkaConsumer, process: Process, dead_letter: DeadLetter, commit: Commit
) -> None:
    """Read every assigned partition record by record up to its current end, stepping over unreadable ones."""
    for tp in consumer.assignment():
        end = (await consumer.end_offsets([tp]))[tp]
        position = await consumer.position(tp)
        consumer.seek(tp, position)  # drop what the failed fetch left buffered
        while position < end:
            try:
                got = await consumer.getmany(tp, timeout_ms=1000, max_records=1)
            except PARSE_ERRORS as exc:
                position = await consumer.position(tp)
                reason = f"the Kafka client cannot read this record, or one before it in its batch: {exc}"
                await dead_letter(_stand_in(tp, position), InvalidEvent(cut(reason), "record"))
                position += 1
                consumer.seek(tp, position)
                await commit({tp: position})
                continue
            records = got.get(tp, [])
            if not records:
                break  # the broker had nothing more for now: the normal loop carries on
            for record in records:
                await process(record)
            position = records[-1].offset + 1
            await commit({tp: position})


def _stand_in(tp: TopicPartition, offset: int) -> ConsumerRecord:
    return ConsumerRecord(tp.topic, tp.partition, offset, None, 0, None, None, None, 0, 0, [])
