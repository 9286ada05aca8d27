"""``restore --key-file`` checks each record's seal as the restored coordinators will: records sealed with the key
pass, a changed value, another key or no seal at all are counted and the first ones named."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from myolo.common.keys import Ed25519Signer, write_private
from myolo.coordinator.backup.archive import Archive, ArchiveWriter, read_archive
from myolo.coordinator.backup.key_check import check_seals
from myolo.coordinator.backup.schema import Record, TopicInfo, encode_records, topic_member
from myolo.coordinator.cli.main import app
from myolo.coordinator.state.codec import KIND_HEADER
from myolo.coordinator.state.seal import StateKeys
from tests.unit.coordinator.backup.test_archive import manifest

TOPIC = "myolo.state.jobs"
SIGNER = Ed25519Signer.generate()
KEYS = StateKeys.derive(SIGNER)


def sealed(offset: int, key: bytes, value: bytes | None, keys: StateKeys = KEYS) -> Record:
    headers: list[tuple[str, bytes | None]] = [(KIND_HEADER, b"job"), keys.seal(TOPIC, key, "job", value)]
    return Record(partition=0, offset=offset, timestamp=0, key=key, value=value, headers=headers)


def archive(tmp_path: Path, records: list[Record]) -> Path:
    info = TopicInfo(
        name=TOPIC,
        member=topic_member(TOPIC),
        partitions=6,
        records=len(records),
        read=len(records),
        tombstones=sum(r.value is None for r in records),
        end_offsets={0: len(records)},
    )
    writer = ArchiveWriter()
    writer.add(topic_member(TOPIC), encode_records(records))
    path = tmp_path / "b.tar.gz"
    writer.write(path, manifest(topics=[info], configs=[], checkpoints=[]), 0)
    writer.close()
    return path


def loaded(tmp_path: Path, records: list[Record]) -> Archive:
    return read_archive(archive(tmp_path, records))


def test_records_sealed_with_the_key_verify_and_tombstones_too(tmp_path: Path) -> None:
    report = check_seals(loaded(tmp_path, [sealed(0, b"a", b"{}"), sealed(1, b"b", None)]), KEYS)
    assert (report.checked, report.current, report.failed) == (2, 2, 0)


def test_a_changed_value_another_key_or_no_seal_fail_and_are_named(tmp_path: Path) -> None:
    other = StateKeys.derive(Ed25519Signer.generate())
    changed = sealed(0, b"a", b'{"x":1}')
    changed.value = b'{"x":2}'
    unsealed = Record(partition=0, offset=2, timestamp=0, key=b"c", value=b"{}", headers=[(KIND_HEADER, b"job")])
    report = check_seals(loaded(tmp_path, [changed, sealed(1, b"b", b"{}", other), unsealed]), KEYS)
    assert (report.checked, report.failed) == (3, 3)
    assert report.first[0] == f"{TOPIC} key 'a': seal does not match the record"
    assert "not one of ours" in report.first[1] and "not sealed" in report.first[2]


def test_restore_key_file_refuses_records_of_another_key(tmp_path: Path) -> None:
    key = tmp_path / "coordinator.key"
    write_private(key, SIGNER)
    path = archive(tmp_path, [sealed(0, b"a", b"{}")])
    result = CliRunner().invoke(app, ["restore", str(path), "--dry-run", "--key-file", str(key)])
    assert result.exit_code == 0 and f"seals: all 1 records verify with key {SIGNER.key_id}" in result.output
    theirs = tmp_path / "theirs.key"
    write_private(theirs, Ed25519Signer.generate())
    result = CliRunner().invoke(app, ["restore", str(path), "--dry-run", "--key-file", str(theirs)])
    assert result.exit_code == 2 and "1 of 1 records are not sealed with the key of" in result.output
