"""A state-owning component added from outside ``coordinator/`` (defined here, nothing else edited) is assembled
with the real ones; its topic is created, backed up and restored because its declaration says so.

On one real broker the toy writes records; a backup of every state topic the components declare takes them; a
restore into a second, empty broker puts them back byte for byte, their seals verify with the key, and a
coordinator started there with the same components reads them back with nothing refused as forged.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from myolo.common.clock import SimClock
from myolo.common.keys import load_signer
from myolo.coordinator.backup import restore as rs
from myolo.coordinator.backup.archive import read_archive
from myolo.coordinator.backup.key_check import check_seals
from myolo.coordinator.backup.make import BackupRequest, default_topics, make_backup
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.core.component import Component, StateTopic
from myolo.coordinator.core.coordinator import Coordinator, state_topics, topic_specs
from myolo.coordinator.fleet.interface import FleetNodes
from myolo.coordinator.localstack.broker import LocalBroker
from myolo.coordinator.state import StateKeys
from myolo.events.settings import KafkaSettings
from myolo.events.topics import ensure_topics
from tests.integration.coordinator.conftest import cluster_config, one_leader
from tests.support.helpers import read_topic

TOY_TOPIC = "myolo.state.toy-notes"


class ToyNote(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    n: int


class ToyNotes(Component):
    """A component of its own: one compacted topic with one record kind, and a need of a real component."""

    name = "toy-notes"
    owns = (StateTopic(TOY_TOPIC, {"toy-note": ToyNote}, partitions=2, key="note id", description="toy notes"),)
    requires = (FleetNodes,)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.fleet = ctx.need(FleetNodes)
        self.notes: dict[str, ToyNote] = {}

    async def write(self, key: str, note: ToyNote) -> None:
        await self.ctx.store.put(TOY_TOPIC, key, note)  # written first, held after (like every component)
        self.notes[key] = note

    def on_state(self, topic, key, record, kind) -> None:
        if record is None:
            self.notes.pop(key, None)
        else:
            self.notes[key] = record


WITH_TOY = (*COMPONENTS, ToyNotes)


@pytest.mark.kafka
async def test_a_component_from_outside_is_backed_up_and_restored_from_its_declaration(
    tmp_path: Path, brokers: tuple[LocalBroker, LocalBroker], key_file: Path
) -> None:
    src_broker, dst_broker = brokers
    src = KafkaSettings(bootstrap=src_broker.bootstrap, client_id="test")
    dst = KafkaSettings(bootstrap=dst_broker.bootstrap, client_id="test")
    catalogue = topic_specs(WITH_TOY)
    assert TOY_TOPIC in default_topics(state_topics(WITH_TOY))
    assert TOY_TOPIC in await ensure_topics(src.client_kwargs(), catalogue)  # created from its declaration

    first = Coordinator(cluster_config(src.bootstrap, key_file, "first", WITH_TOY), WITH_TOY, SimClock())
    await first.start()
    try:
        await one_leader(first)
        toy = first.get(ToyNotes)
        await toy.write("a", ToyNote(text="alpha", n=1))
        await toy.write("b", ToyNote(text="beta", n=2))
        await toy.write("a", ToyNote(text="alpha again", n=3))  # superseded: the backup keeps the newest
    finally:
        await first.stop()

    archive_path = tmp_path / "backup.tar.gz"
    request = BackupRequest(output=archive_path, topics=default_topics(state_topics(WITH_TOY)), checkpoints=False)
    result = await make_backup(src, request, lambda _: None)
    toy_info = next(t for t in result.manifest.topics if t.name == TOY_TOPIC)
    assert (toy_info.partitions, toy_info.records) == (2, 2)

    archive = read_archive(archive_path)
    report = check_seals(archive, StateKeys.derive(load_signer(key_file)))
    assert report.failed == 0 and report.checked >= 2
    topics = await rs.check_target(dst, archive, False, catalogue)
    assert TOY_TOPIC in {t.name for t in topics}
    done = await rs.restore_topics(dst, archive, topics, catalogue=catalogue, replication_factor=1, progress=print)
    assert next(d for d in done if d.name == TOY_TOPIC).verified == 2

    def newest(records) -> dict:
        return {(r.partition, r.key): (r.value, list(r.headers)) for r in records}

    assert newest(await read_topic(dst, TOY_TOPIC)) == newest(await read_topic(src, TOY_TOPIC))

    again = Coordinator(cluster_config(dst.bootstrap, key_file, "restored", WITH_TOY), WITH_TOY, SimClock())
    await again.start()
    try:
        assert again.tail.forged == 0 and again.tail.skipped == 0
        assert again.get(ToyNotes).notes == {"a": ToyNote(text="alpha again", n=3), "b": ToyNote(text="beta", n=2)}
    finally:
        await again.stop()
