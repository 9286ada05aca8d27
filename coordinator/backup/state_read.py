"""Reading state topics for a backup: from the beginning to the end offsets taken at the start (one moment for
every topic), so it ends.

A compacted topic is compacted lazily: it may still hold older values of a key, and tombstones. What a reader of
the whole log ends up with is the newest record of each key (a tombstone: the key is deleted), so that is what a
backup keeps, in offset order: the same state, in fewer records. A tombstone is kept (it is the newest record of
its key, sealed like any other), so the restored log reads the same to a coordinator.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from myolo.coordinator.backup.schema import Record
from myolo.events.aiokafka_internals import load_metadata
from myolo.events.settings import KafkaSettings

Progress = Callable[[str], None]
IDLE_POLLS = 120  # empty polls of 0.5 s in a row, while behind the end offsets, before giving up


@dataclass
class TopicDump:
    """One topic as backed up: ``records`` (the newest per key, by partition then offset), ``read`` in all."""

    name: str
    partitions: int
    records: list[Record]
    read: int
    end_offsets: dict[int, int]

    @property
    def tombstones(self) -> int:
        return sum(1 for r in self.records if r.value is None)


async def cluster_id(settings: KafkaSettings) -> str | None:
    """The cluster's id (for the manifest), None when the broker does not say."""
    admin = AIOKafkaAdminClient(**settings.client_kwargs())
    try:
        await admin.start()
        found = (await admin.describe_cluster()).get("cluster_id")
        return str(found) if found else None
    except KafkaError:
        return None
    finally:
        with contextlib.suppress(Exception):
            await admin.close()


async def existing_topics(settings: KafkaSettings) -> set[str]:
    """The topics the cluster has. Asked of the admin API (a list of all): a consumer asking for the metadata of a
    topic that does not exist makes a broker with ``auto.create.topics.enable`` create it, with the broker's
    defaults (one partition, not compacted), which a backup must never do, nor a restore before it creates the
    topic as the catalogue says."""
    admin = AIOKafkaAdminClient(**settings.client_kwargs())
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


async def read_topics(
    settings: KafkaSettings, topics: list[str], progress: Progress = lambda _: None
) -> tuple[list[TopicDump], list[str]]:
    """Every topic of ``topics`` that exists, read to its end offsets of now; and the names that do not exist."""
    there = await existing_topics(settings)
    absent = [t for t in topics if t not in there]
    present = [t for t in topics if t in there]
    consumer = AIOKafkaConsumer(**settings.client_kwargs(), enable_auto_commit=False, group_id=None)
    await consumer.start()
    try:
        await load_metadata(consumer, present)
        found = {t: sorted(consumer.partitions_for_topic(t) or ()) for t in present}  # before assign() narrows it
        for topic, partitions in found.items():
            if not partitions:
                raise RuntimeError(f"topic {topic!r} is listed by the cluster but has no partitions in its metadata")
        every = [TopicPartition(t, p) for t, parts in found.items() for p in parts]
        end = await consumer.end_offsets(every) if every else {}  # one moment for every topic, before any is read
        dumps = [await _read_one(consumer, topic, found[topic], end, progress) for topic in present]
        return dumps, absent
    finally:
        await consumer.stop()


async def _read_one(
    consumer: AIOKafkaConsumer,
    topic: str,
    partitions: list[int],
    end: dict[TopicPartition, int],
    progress: Progress,
) -> TopicDump:
    parts = [TopicPartition(topic, p) for p in partitions]
    consumer.assign(parts)
    await consumer.seek_to_beginning(*parts)
    latest: dict[tuple[int, bytes], Record] = {}
    unkeyed: list[Record] = []  # a compacted topic refuses them; kept all, should another policy have let one in
    read = idle = 0
    while behind := [tp for tp in parts if await consumer.position(tp) < end[tp]]:
        batches = await consumer.getmany(*behind, timeout_ms=500, max_records=5000)
        idle = 0 if batches else idle + 1
        if idle >= IDLE_POLLS:
            raise TimeoutError(f"{topic}: no records while behind the end offsets of partitions {behind}")
        for tp, records in batches.items():
            for r in records:
                if r.offset >= end[tp]:
                    continue  # written after the backup started: the next backup has it
                read += 1
                rec = Record(
                    partition=r.partition,
                    offset=r.offset,
                    timestamp=r.timestamp,
                    key=r.key,
                    value=r.value,
                    headers=[(k, v) for k, v in r.headers],
                )
                if r.key is None:
                    unkeyed.append(rec)
                else:
                    latest[(r.partition, r.key)] = rec
        progress(f"{topic}: {read} records read")
    kept = sorted([*latest.values(), *unkeyed], key=lambda r: (r.partition, r.offset))
    return TopicDump(topic, len(parts), kept, read, {tp.partition: end[tp] for tp in parts})
