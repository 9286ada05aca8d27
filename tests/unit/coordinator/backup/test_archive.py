"""The backup archive format, in memory: a round trip keeps every record byte for byte (tombstones, headers, None
header values), and every kind of damage or hostile content is refused with its reason, naming the member."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from pathlib import Path

import msgspec
import pytest

from myolo.coordinator.backup.archive import ArchiveWriter, Limits, read_archive, read_from
from myolo.coordinator.backup.schema import (
    FORMAT,
    FORMAT_VERSION,
    BadArchive,
    CheckpointInfo,
    Cluster,
    ConfigInfo,
    Manifest,
    Member,
    Record,
    TopicInfo,
    encode_manifest,
    encode_records,
)

TOPIC = "myolo.state.jobs"
MEMBER = f"topics/{TOPIC}.jsonl"
RECORDS = [
    Record(
        partition=0,
        offset=3,
        timestamp=1_700_000_000_000,
        key=b"job-a",
        value=b'{"name":"job-a"}',
        headers=[("myolo-state-kind", b"job"), ("myolo-state-sig", b"k1:00ff")],
    ),
    Record(partition=0, offset=7, timestamp=1, key=b"job-b", value=None, headers=[("myolo-state-kind", b"job")]),
    Record(partition=2, offset=0, timestamp=2, key=b"\x00\xffbin", value=b"\x00\x01", headers=[("empty", None)]),
]
CONFIG = b'instance_id = "c1"\n'
METADATA = b"\x80\x04binary dcp metadata"


def manifest(**changes) -> Manifest:
    base = Manifest(
        format=FORMAT,
        version=FORMAT_VERSION,
        created="2026-01-01T00:00:00Z",
        myolotrain="4.0.0",
        source=Cluster(bootstrap="127.0.0.1:9092", cluster_id="abc"),
        topics=[
            TopicInfo(
                name=TOPIC, member=MEMBER, partitions=3, records=3, read=5, tombstones=1, end_offsets={0: 8, 2: 1}
            )
        ],
        configs=[ConfigInfo(member="configs/coordinator.toml", source="/etc/myolo/coordinator.toml")],
        checkpoints=[
            CheckpointInfo(job="job-a", checkpoint_dir="/ckpt/a", members=["checkpoints/job-a/step-00000020/.metadata"])
        ],
    )
    return msgspec.structs.replace(base, **changes)


def contents() -> dict[str, bytes]:
    return {
        MEMBER: encode_records(RECORDS),
        "configs/coordinator.toml": CONFIG,
        "checkpoints/job-a/step-00000020/.metadata": METADATA,
    }


def good_archive(tmp_path: Path) -> bytes:
    writer = ArchiveWriter()
    for name, data in contents().items():
        writer.add(name, data)
    path = tmp_path / "b.tar.gz"
    writer.write(path, manifest(), 0)
    writer.close()
    return path.read_bytes()


def listed(members: dict[str, bytes]) -> list[Member]:
    return [Member(name=n, size=len(d), sha256=hashlib.sha256(d).hexdigest()) for n, d in members.items()]


def raw_tar(entries: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    """A gzip'd tar of exactly these entries, as an attacker (or a broken copy) would make it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in entries:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buf.getvalue()


def file_entry(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def archive_of(members: dict[str, bytes], listing: dict[str, bytes] | None = None, **changes) -> bytes:
    """Manifest first (listing ``listing``, default the members), then ``members`` as given."""
    head = encode_manifest(manifest(members=listed(members if listing is None else listing), **changes))
    return raw_tar([file_entry("manifest.json", head)] + [file_entry(n, d) for n, d in members.items()])


def refused(data: bytes, limits: Limits = Limits()) -> str:
    with pytest.raises(BadArchive) as exc:
        read_from(io.BytesIO(data), limits)
    return exc.value.reason


def test_round_trip_keeps_every_record_and_file_exactly(tmp_path: Path) -> None:
    archive = read_from(io.BytesIO(good_archive(tmp_path)))
    assert archive.records[TOPIC] == RECORDS
    assert archive.members == contents()
    assert archive.manifest.topics == manifest().topics and archive.manifest.source.cluster_id == "abc"
    assert [m.name for m in archive.manifest.members] == list(contents())
    assert archive.manifest.kept == "latest-per-key"


def test_the_manifest_is_the_first_member_and_the_file_is_private(tmp_path: Path) -> None:
    good_archive(tmp_path)
    path = tmp_path / "b.tar.gz"
    with tarfile.open(path) as tar:
        assert tar.getnames()[0] == "manifest.json"
    assert path.stat().st_mode & 0o777 == 0o600
    assert read_archive(path).records[TOPIC] == RECORDS
    assert [p.name for p in tmp_path.iterdir()] == ["b.tar.gz"]  # no temp file left beside it


def test_a_failed_write_leaves_no_file(tmp_path: Path) -> None:
    writer = ArchiveWriter()
    writer.add(MEMBER, b"x")
    with pytest.raises(FileNotFoundError):
        writer.write(tmp_path / "missing-dir" / "b.tar.gz", manifest(), 0)
    assert list(tmp_path.iterdir()) == []


def test_the_writer_refuses_a_name_it_would_not_read_back() -> None:
    writer = ArchiveWriter()
    with pytest.raises(BadArchive, match=r"'\.\.'"):
        writer.add("configs/../x", b"")
    writer.add(MEMBER, b"")
    with pytest.raises(ValueError, match="added twice"):
        writer.add(MEMBER, b"")


@pytest.mark.parametrize("where", ["middle", "crc", "length"])
def test_a_flipped_byte_of_the_compressed_stream_is_refused(tmp_path: Path, where: str) -> None:
    data = bytearray(good_archive(tmp_path))
    at = {"middle": len(data) // 2, "crc": len(data) - 6, "length": len(data) - 2}[where]
    data[at] ^= 0x01
    assert refused(bytes(data)).startswith("not a complete gzip'd tar archive: ")


def test_a_changed_member_is_refused_with_expected_and_got(tmp_path: Path) -> None:
    good = contents()
    bad = {**good, "configs/coordinator.toml": b'instance_id = "c2"\n'}  # same size, one byte differs
    reason = refused(archive_of(bad, listing=good))
    want = hashlib.sha256(CONFIG).hexdigest()
    got = hashlib.sha256(bad["configs/coordinator.toml"]).hexdigest()
    assert reason == f"member 'configs/coordinator.toml': SHA-256 expected {want}, got {got}"
    longer = {**good, "configs/coordinator.toml": CONFIG + b"#"}
    assert "size expected 19, got 20" in refused(archive_of(longer, listing=good))


def test_a_truncated_archive_is_refused(tmp_path: Path) -> None:
    data = good_archive(tmp_path)
    for cut in (10, len(data) // 2, len(data) - 4):
        assert "not a complete gzip'd tar" in refused(data[:cut])
    assert "not a complete gzip'd tar" in refused(b"")
    assert "not a complete gzip'd tar" in refused(b"not gzip at all")


def test_a_missing_member_is_refused() -> None:
    members = contents()
    partial = {n: d for n, d in members.items() if not n.startswith("checkpoints/")}
    reason = refused(archive_of(partial, listing=members))
    assert (
        reason
        == "member 'checkpoints/job-a/step-00000020/.metadata' listed in manifest.json is missing (1 missing in all)"
    )


def test_an_extra_member_is_refused() -> None:
    members = contents()
    extra = {**members, "configs/sneaky.toml": b"x = 1\n"}
    assert refused(archive_of(extra, listing=members)) == "member 'configs/sneaky.toml' is not listed in manifest.json"


def test_a_listed_member_no_entry_refers_to_is_refused() -> None:
    members = {**contents(), "configs/orphan.toml": b"x = 1\n"}
    assert "belongs to no topic, config or checkpoint" in refused(archive_of(members))


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("../../etc/cron.d/evil", "'..'"),
        ("configs/../../evil", "'..'"),
        ("/etc/passwd", "absolute path"),
        ("configs\\..\\evil", "not a name this format writes"),
        ("configs//x", "not a name this format writes"),
        ("elsewhere/x", "outside"),
    ],
)
def test_a_hostile_member_name_is_refused(name: str, says: str) -> None:
    data = raw_tar([file_entry("manifest.json", encode_manifest(manifest())), file_entry(name, b"x")])
    reason = refused(data)
    assert says in reason and repr(name)[1:12] in reason


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        (tarfile.SYMTYPE, "is a symbolic link (to '/etc/shadow')"),
        (tarfile.LNKTYPE, "is a hard link (to '/etc/shadow')"),
        (tarfile.CHRTYPE, "device or FIFO"),
        (tarfile.BLKTYPE, "device or FIFO"),
        (tarfile.FIFOTYPE, "device or FIFO"),
        (tarfile.DIRTYPE, "not a regular file"),
    ],
)
def test_links_devices_and_folders_are_refused(kind: bytes, says: str) -> None:
    info = tarfile.TarInfo("configs/coordinator.toml")
    info.type = kind
    info.linkname = "/etc/shadow"
    data = raw_tar([file_entry("manifest.json", encode_manifest(manifest(members=listed(contents())))), (info, b"")])
    reason = refused(data)
    assert reason.startswith("member 'configs/coordinator.toml' ") and says in reason, reason


def test_oversized_members_and_archives_are_refused(tmp_path: Path) -> None:
    data = good_archive(tmp_path)
    assert "more than the limit of 10" in refused(data, Limits(max_member_bytes=10))
    assert "members add up to more than 100 bytes" in refused(data, Limits(max_total_bytes=100))
    assert refused(data, Limits(max_members=2)) == "manifest.json lists 3 members, more than 2"
    assert "is 1" in refused(data, Limits(max_manifest_bytes=100)) and "manifest.json" in refused(
        data, Limits(max_manifest_bytes=100)
    )


def test_a_decompression_bomb_stops_at_the_byte_bound() -> None:
    """A header claiming a small member with gigabytes of zeros after the archive: the stream stops reading."""
    inner = io.BytesIO()
    with tarfile.open(fileobj=inner, mode="w") as tar:
        head = encode_manifest(manifest(topics=[], configs=[], checkpoints=[]))
        info = tarfile.TarInfo("manifest.json")
        info.size = len(head)
        tar.addfile(info, io.BytesIO(head))
    bomb = gzip.compress(inner.getvalue() + b"\0" * (8 << 20))
    reason = refused(bomb, Limits(max_members=1, max_total_bytes=1000, max_manifest_bytes=4096))
    assert "decompresses to more than" in reason


def test_data_after_the_end_of_the_tar_is_refused(tmp_path: Path) -> None:
    plain = gzip.decompress(good_archive(tmp_path))
    assert refused(gzip.compress(plain + b"trailing garbage")) == "data after the end of the tar archive"


def test_a_bad_manifest_is_refused() -> None:
    members = contents()

    def with_head(head: bytes) -> bytes:
        return raw_tar([file_entry("manifest.json", head)] + [file_entry(n, d) for n, d in members.items()])

    assert "manifest.json is not a JSON object" in refused(with_head(b"{not json"))
    assert "manifest.json is not a JSON object" in refused(with_head(b"[1, 2]"))
    assert "not a myoloctl backup" in refused(with_head(b'{"format": "other", "version": 1}'))
    newer = msgspec.json.encode({"format": FORMAT, "version": FORMAT_VERSION + 1})
    assert f"version {FORMAT_VERSION + 1}, this myoloctl reads version {FORMAT_VERSION}" in refused(with_head(newer))
    missing_field = msgspec.json.encode({"format": FORMAT, "version": FORMAT_VERSION})
    assert "manifest.json is not a valid manifest" in refused(with_head(missing_field))


def test_the_manifest_must_come_first_and_once() -> None:
    members = contents()
    head = encode_manifest(manifest(members=listed(members)))
    entries = [file_entry(n, d) for n, d in members.items()]
    assert (
        refused(raw_tar([*entries, file_entry("manifest.json", head)]))
        == f"the first member is {MEMBER!r}, expected manifest.json"
    )
    twice = raw_tar([file_entry("manifest.json", head), file_entry("manifest.json", head), *entries])
    assert refused(twice) == "member 'manifest.json' appears twice"
    dup = raw_tar([file_entry("manifest.json", head), *entries, entries[0]])
    assert refused(dup) == f"member {MEMBER!r} appears twice"
    assert refused(raw_tar([])) == "the archive is empty (no manifest.json)"


def test_records_that_disagree_with_the_manifest_are_refused() -> None:
    def with_records(held: list[Record], **topic_changes) -> str:
        members = {**contents(), MEMBER: encode_records(held)}
        topic = msgspec.structs.replace(manifest().topics[0], **topic_changes)
        return refused(archive_of(members, topics=[topic]))

    assert "says 3 records" in with_records(RECORDS[:2])
    assert "says 1 tombstones, the member holds 0" in with_records([RECORDS[0], RECORDS[2]], records=2)
    assert "has 2 partitions" in with_records(RECORDS, partitions=2)
    dup = msgspec.structs.replace(RECORDS[0], offset=5)
    assert "appears twice in partition 0" in with_records([RECORDS[0], dup, RECORDS[1]], records=3, tombstones=1)
    assert "not increasing" in with_records([RECORDS[1], RECORDS[0], RECORDS[2]])
    members = {**contents(), MEMBER: b'{"partition": "x"}\n'}
    assert f"{MEMBER} line 1: not a record" in refused(archive_of(members))


def test_entries_must_name_their_own_members() -> None:
    members = contents()
    other = msgspec.structs.replace(manifest().topics[0], name="myolo.state.registry")
    assert "its records are in 'topics/myolo.state.registry.jsonl'" in refused(archive_of(members, topics=[other]))
    misplaced = [ConfigInfo(member="checkpoints/job-a/step-00000020/.metadata", source="x")]
    assert "should be under configs/" in refused(archive_of(members, configs=misplaced, checkpoints=[]))
