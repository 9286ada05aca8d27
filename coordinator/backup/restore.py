"""Writing a verified archive back: into an empty cluster, each record to its partition, then read back.

A state record's seal covers its topic, key, kind and value, so records go back byte for byte with their headers
(and timestamps) to the same topic; the same partition keeps each key's order as it was. The producer is
idempotent with acks=all (a retry never writes a record twice). Everything that could refuse the restore (a
topic this version does not know, too few partitions, records already there, files in the way) is checked
before the first record is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from myolo.common.files import atomic_write
from myolo.coordinator.backup.archive import Archive
from myolo.coordinator.backup.schema import Record
from myolo.coordinator.backup.state_read import existing_topics
from myolo.events.aiokafka_internals import load_metadata
from myolo.events.bus.producer import DEFAULT_PRODUCER_OPTIONS
from myolo.events.settings import KafkaSettings
from myolo.events.topics import Topic, ensure_topics

Progress = Callable[[str], None]
IDLE_POLLS = 120  # empty polls of 0.5 s in a row before reading back is given up


class RestoreRefused(Exception):
    """The target is not one to restore into (or the archive does not fit it): nothing was written."""


@dataclass
class TopicRestored:
    name: str
    partitions: int
    written: int
    verified: int


def catalogue_topics(archive: Archive, catalogue: Sequence[Topic]) -> list[Topic]:
    """The archive's topics as ``catalogue`` (every topic of the coordinator: the events' and its components'
    state topics) defines them, with the backup's partition count (a key's partition is its hash modulo the
    count: with another count, the coordinators' next write of a key would land on another partition than its
    restored record, and which one a reader applies last would be arbitrary). Refused when one is not a state
    topic of this version."""
    by_name = {t.name: t for t in catalogue}
    out = []
    for info in archive.manifest.topics:
        topic = by_name.get(info.name)
        if topic is None or not topic.compacted:
            raise RestoreRefused(
                f"topic {info.name!r} is not a state topic of this version (restore with the "
                f"myoloctl {archive.manifest.myolotrain} that made the backup)"
            )
        out.append(dataclasses.replace(topic, partitions=info.partitions))
    return out


async def existing_records(settings: KafkaSettings, names: list[str]) -> dict[str, tuple[int, int]]:
    """For each topic of ``names`` that exists on the target: (partitions, records it holds now)."""
    listed = await existing_topics(settings)
    there = [n for n in names if n in listed]
    out: dict[str, tuple[int, int]] = {}
    if not there:
        return out
    consumer = AIOKafkaConsumer(**settings.client_kwargs(), enable_auto_commit=False, group_id=None)
    await consumer.start()
    try:
        await load_metadata(consumer, there)
        for name in there:
            parts = [TopicPartition(name, p) for p in sorted(consumer.partitions_for_topic(name) or ())]
            begin = await consumer.beginning_offsets(parts)
            end = await consumer.end_offsets(parts)
            out[name] = (len(parts), sum(end[tp] - begin[tp] for tp in parts))
        return out
    finally:
        await consumer.stop()


async def check_target(
    settings: KafkaSettings, archive: Archive, force: bool, catalogue: Sequence[Topic]
) -> list[Topic]:
    """The topics to write, once the target is known to take them: refused naming a topic that holds records
    (unless ``force``) or exists with another partition count than the backup's."""
    topics = catalogue_topics(archive, catalogue)
    wanted = {i.name: i for i in archive.manifest.topics}
    found = await existing_records(settings, list(wanted))
    for name, (partitions, _) in found.items():
        if partitions != wanted[name].partitions:
            raise RestoreRefused(
                f"topic {name!r} exists on the target with {partitions} partitions, the backup's has "
                f"{wanted[name].partitions} (each key must stay on its partition: delete the topic so the restore "
                "creates it, or restore into another cluster)"
            )
    full = {name: count for name, (_, count) in found.items() if count}
    if full and not force:
        listed = ", ".join(f"{name} ({count} records)" for name, count in sorted(full.items()))
        raise RestoreRefused(
            f"the target cluster is not empty: {listed}; restore into an empty cluster, or pass --force to write "
            "the backup's records after them (the newest record of each key wins)"
        )
    return topics


async def restore_topics(
    settings: KafkaSettings,
    archive: Archive,
    topics: list[Topic],
    *,
    catalogue: Sequence[Topic],
    replication_factor: int,
    progress: Progress,
) -> list[TopicRestored]:
    """Create the catalogue's missing topics (all of them: a secured broker makes none on first use, and the
    coordinators and agents of the restored cluster need them), write every record back to its partition, then
    read the new records back and compare them with the archive's (count, key, value, headers): ``RuntimeError``
    naming the first difference. ``topics``: the archive's, as :func:`check_target` found them."""
    names = {t.name for t in topics}
    wanted = (*topics, *(t for t in catalogue if t.name not in names))
    created = await ensure_topics(settings.client_kwargs(), wanted, replication_factor=replication_factor)
    if created:
        progress(f"created {len(created)} topics: {', '.join(created)}")
    parts = [TopicPartition(i.name, p) for i in archive.manifest.topics for p in range(i.partitions)]
    before = await _end_offsets(settings, parts)
    await _write(settings, archive, progress)
    after = await _end_offsets(settings, parts)
    out = []
    for info in archive.manifest.topics:
        records = archive.records[info.name]
        by_part = {p: [r for r in records if r.partition == p] for p in range(info.partitions)}
        for p, expected in by_part.items():
            tp = TopicPartition(info.name, p)
            if after[tp] - before[tp] != len(expected):
                raise RuntimeError(
                    f"{info.name} partition {p}: {len(expected)} records written, the log grew by "
                    f"{after[tp] - before[tp]} (another writer at the same time?)"
                )
        verified = await _read_back(settings, info.name, by_part, before)
        out.append(TopicRestored(info.name, info.partitions, len(records), verified))
        progress(f"{info.name}: {len(records)} records written and read back")
    return out


async def _end_offsets(settings: KafkaSettings, parts: list[TopicPartition]) -> dict[TopicPartition, int]:
    consumer = AIOKafkaConsumer(**settings.client_kwargs(), enable_auto_commit=False, group_id=None)
    await consumer.start()
    try:
        await load_metadata(consumer, sorted({tp.topic for tp in parts}))
        return await consumer.end_offsets(parts) if parts else {}
    finally:
        await consumer.stop()


async def _write(settings: KafkaSettings, archive: Archive, progress: Progress) -> None:
    options = {**DEFAULT_PRODUCER_OPTIONS, **settings.client_kwargs(), "max_request_size": 16 << 20}
    producer = AIOKafkaProducer(**options)
    await producer.start()
    try:
        for info in archive.manifest.topics:
            pending = []
            for r in archive.records[info.name]:
                pending.append(
                    await producer.send(
                        info.name,
                        value=r.value,
                        key=r.key,
                        partition=r.partition,
                        timestamp_ms=r.timestamp,
                        headers=list(r.headers),
                    )
                )
            for fut in pending:
                await fut  # acknowledged by every in-sync replica (acks=all), or raises
            progress(f"{info.name}: {len(pending)} records written")
    finally:
        await producer.stop()


async def _read_back(
    settings: KafkaSettings, topic: str, expected: dict[int, list[Record]], start: dict[TopicPartition, int]
) -> int:
    consumer = AIOKafkaConsumer(**settings.client_kwargs(), enable_auto_commit=False, group_id=None)
    await consumer.start()
    verified = 0
    try:
        await load_metadata(consumer, [topic])
        for p, records in expected.items():
            if not records:
                continue
            tp = TopicPartition(topic, p)
            consumer.assign([tp])
            consumer.seek(tp, start[tp])
            got: list = []
            idle = 0
            while len(got) < len(records):
                batch = await consumer.getmany(tp, timeout_ms=500, max_records=5000)
                idle = 0 if batch else idle + 1
                if idle >= IDLE_POLLS:
                    raise RuntimeError(f"{topic} partition {p}: {len(got)} of {len(records)} records read back")
                got += batch.get(tp, [])
            for want, r in zip(records, got, strict=False):
                same = (r.key, r.value, [tuple(h) for h in r.headers]) == (want.key, want.value, list(want.headers))
                if not same:
                    raise RuntimeError(f"{topic} partition {p} offset {r.offset}: read back differs from the backup")
                verified += 1
    finally:
        await consumer.stop()
    return verified


def files_to_restore(archive: Archive) -> list[str]:
    """The configs' and checkpoint manifests' member names."""
    names = [c.member for c in archive.manifest.configs]
    return names + [m for c in archive.manifest.checkpoints for m in c.members]


def check_destination(dest: Path, members: list[str], force: bool) -> None:
    """Refuse files in the way (unless ``force``) and any symbolic link on the way under ``dest``."""
    for name in members:
        target = dest / name
        here = dest
        for part in Path(name).parts[:-1]:
            here = here / part
            if here.is_symlink() or (here.exists() and not here.is_dir()):
                raise RestoreRefused(f"--restore-configs: {str(here)!r} is a link or a file, not a folder")
        if target.is_symlink() or (target.exists() and not force):
            raise RestoreRefused(f"--restore-configs: {str(target)!r} already exists (pass --force to replace it)")


def write_files(dest: Path, archive: Archive, members: list[str]) -> list[Path]:
    """Write each member under ``dest`` at its archive path (mode 0600: configs can name secrets' paths)."""
    out = []
    for name in members:
        target = dest / name
        atomic_write(target, archive.members[name], mode=0o600)
        out.append(target)
    return out
