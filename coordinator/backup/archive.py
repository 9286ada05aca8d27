"""Writing a backup archive (temp file, then rename) and reading one back as hostile input.

Reading never extracts to disk: members are read into memory through a decompressed stream that stops at a
byte bound, each checked before it is read (a regular file, a name we write, within the size bounds, listed in
the manifest), then compared with the manifest's size and SHA-256. Any problem is a :class:`BadArchive` naming
the member and what was expected: nothing half-read is ever returned.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import msgspec

from myolo.common.files import fsync_dir
from myolo.coordinator.backup.schema import (
    CHECKPOINTS_DIR,
    CONFIGS_DIR,
    MANIFEST,
    BadArchive,
    Manifest,
    Member,
    Record,
    check_name,
    decode_manifest,
    decode_records,
    encode_manifest,
    topic_member,
)

SPOOL_BYTES = 16 << 20  # a member larger than this is staged in a temp file, not in memory
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Limits:
    """Bounds on what a restore reads: the archive is input from anywhere, so a member count, a size per member
    and a total (decompressed) are enforced before anything is read."""

    max_members: int = 100_000
    max_member_bytes: int = 1 << 30
    max_total_bytes: int = 2 << 30
    max_manifest_bytes: int = 64 << 20


@dataclass
class Archive:
    """A verified archive: its manifest, every member's bytes, and each topic's records decoded."""

    manifest: Manifest
    members: dict[str, bytes]
    records: dict[str, list[Record]] = field(default_factory=dict)


class ArchiveWriter:
    """Members staged (spooled to disk past :data:`SPOOL_BYTES`) so the manifest, which lists their checksums,
    can be the first member of the archive."""

    def __init__(self) -> None:
        self._staged: dict[str, tuple[IO[bytes], Member]] = {}

    def add(self, name: str, data: bytes) -> Member:
        check_name(name)
        if name == MANIFEST or name in self._staged:
            raise ValueError(f"archive member {name!r} added twice")
        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 (closed by close())
        spool.write(data)
        member = Member(name=name, size=len(data), sha256=hashlib.sha256(data).hexdigest())
        self._staged[name] = (spool, member)
        return member

    @property
    def members(self) -> list[Member]:
        return [m for _, m in self._staged.values()]

    def write(self, path: Path, manifest: Manifest, mtime: float) -> int:
        """Write the archive to ``path`` (a temp file beside it, fsync, rename: a failure leaves no ``path``);
        ``manifest.members`` is filled here. Returns the archive's size in bytes."""
        manifest = msgspec.structs.replace(manifest, members=self.members)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                with tarfile.open(fileobj=out, mode="w:gz", compresslevel=6, format=tarfile.PAX_FORMAT) as tar:
                    head = encode_manifest(manifest)
                    _add(tar, MANIFEST, io.BytesIO(head), mtime, len(head))
                    for spool, member in self._staged.values():
                        spool.seek(0)
                        _add(tar, member.name, spool, mtime, member.size)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o600)  # configs and node keys' records: the operator's eyes only
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        fsync_dir(path.parent)
        return path.stat().st_size

    def close(self) -> None:
        for spool, _ in self._staged.values():
            spool.close()
        self._staged.clear()


def _add(tar: tarfile.TarFile, name: str, data: IO[bytes], mtime: float, size: int) -> None:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = int(mtime)
    info.mode = 0o600
    tar.addfile(info, data)


class _Bounded:
    """A file object over ``inner`` that refuses to give more than ``limit`` bytes (a decompression bomb, or a
    tar header claiming a huge pax record, stops here)."""

    def __init__(self, inner: IO[bytes], limit: int) -> None:
        self._inner = inner
        self._limit = limit
        self.read_bytes = 0
        self.exhausted = False  # the bound was hit

    def read(self, n: int = -1) -> bytes:
        want = _CHUNK if n is None or n < 0 else n
        chunk = self._inner.read(want)
        self.read_bytes += len(chunk)
        if self.read_bytes > self._limit:
            self.exhausted = True
            raise BadArchive(f"the archive decompresses to more than {self._limit} bytes (the limit; --max-bytes)")
        return chunk


def read_archive(path: Path, limits: Limits = Limits()) -> Archive:
    """Open ``path`` and verify it (see :func:`read_from`)."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed below; an error opening it names the file)
    except OSError as exc:
        raise BadArchive(f"cannot read {str(path)!r}: {exc.strerror}") from None
    with handle:
        return read_from(handle, limits)


def read_from(raw: IO[bytes], limits: Limits = Limits()) -> Archive:
    """Read and verify a gzip'd tar from ``raw``: every member checked against the manifest (the first member),
    every listed member present, nothing else present, each topic's records decoded and consistent."""
    overhead = 1024 * (limits.max_members + 16) + 2 * tarfile.RECORDSIZE  # tar headers and padding
    gz = gzip.GzipFile(fileobj=raw, mode="rb")
    bounded = _Bounded(gz, limits.max_total_bytes + limits.max_manifest_bytes + overhead)
    try:
        manifest, members = _read_members(bounded, limits)
        _drain(bounded)
    except BadArchive as exc:
        if not bounded.exhausted:
            _blame_compression(bounded, exc)
        raise
    except _STREAM_ERRORS as exc:
        raise BadArchive(f"not a complete gzip'd tar archive: {exc or type(exc).__name__}") from None
    archive = Archive(manifest=manifest, members=members)
    _check_contents(archive)
    return archive


_STREAM_ERRORS = (tarfile.TarError, EOFError, zlib.error, OSError, UnicodeError)


def _blame_compression(stream: _Bounded, found: BadArchive) -> None:
    """A damaged compressed stream shows first as a damaged member; when the gzip's own check (its CRC, read at
    the end) fails too, that is the cause to report."""
    try:
        while stream.read(_CHUNK):
            pass
    except BadArchive:
        return
    except _STREAM_ERRORS as exc:
        raise BadArchive(
            f"not a complete gzip'd tar archive: {exc or type(exc).__name__} (first seen as: {found.reason})"
        ) from None


def _read_members(stream: _Bounded, limits: Limits) -> tuple[Manifest, dict[str, bytes]]:
    manifest: Manifest | None = None
    listed: dict[str, Member] = {}
    members: dict[str, bytes] = {}
    total = 0
    with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]
        for count, info in enumerate(_members(tar), 1):
            name = info.name
            if count > limits.max_members + 1:
                raise BadArchive(f"more than {limits.max_members} members (the limit)")
            check_name(name)
            _check_type(info)
            if name in members or (name == MANIFEST and manifest is not None):
                raise BadArchive(f"member {name!r} appears twice")
            if manifest is None and name != MANIFEST:
                raise BadArchive(f"the first member is {name!r}, expected {MANIFEST}")
            if manifest is not None and name not in listed:
                raise BadArchive(f"member {name!r} is not listed in {MANIFEST}")
            bound = limits.max_manifest_bytes if name == MANIFEST else limits.max_member_bytes
            if info.size < 0 or info.size > bound:
                raise BadArchive(f"member {name!r} is {info.size} bytes, more than the limit of {bound}")
            total += info.size
            if total > limits.max_total_bytes:
                raise BadArchive(f"members add up to more than {limits.max_total_bytes} bytes (the limit)")
            data = _read_one(tar, info)
            if manifest is None:
                manifest = decode_manifest(data)
                listed = _listing(manifest, limits)
                continue
            expected = listed[name]
            if len(data) != expected.size:
                raise BadArchive(f"member {name!r}: size expected {expected.size}, got {len(data)}")
            got = hashlib.sha256(data).hexdigest()
            if got != expected.sha256:
                raise BadArchive(f"member {name!r}: SHA-256 expected {expected.sha256}, got {got}")
            members[name] = data
    if manifest is None:
        raise BadArchive(f"the archive is empty (no {MANIFEST})")
    missing = [n for n in listed if n not in members]
    if missing:
        raise BadArchive(f"member {missing[0]!r} listed in {MANIFEST} is missing ({len(missing)} missing in all)")
    return manifest, members


def _members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    while (info := tar.next()) is not None:
        yield info


def _check_type(info: tarfile.TarInfo) -> None:
    if info.issym() or info.islnk():
        kind = "symbolic" if info.issym() else "hard"
        raise BadArchive(f"member {info.name!r} is a {kind} link (to {info.linkname[:200]!r}); links are refused")
    if info.ischr() or info.isblk() or info.isfifo():
        raise BadArchive(f"member {info.name!r} is a device or FIFO; only regular files are allowed")
    if not info.isreg() or info.issparse():
        raise BadArchive(f"member {info.name!r} is not a regular file (tar type {info.type!r})")


def _read_one(tar: tarfile.TarFile, info: tarfile.TarInfo) -> bytes:
    handle = tar.extractfile(info)
    if handle is None:
        raise BadArchive(f"member {info.name!r} has no data")
    data = handle.read()
    if len(data) != info.size:
        raise BadArchive(f"member {info.name!r}: {info.size} bytes declared, {len(data)} present (truncated)")
    return data


def _listing(manifest: Manifest, limits: Limits) -> dict[str, Member]:
    listed: dict[str, Member] = {}
    if len(manifest.members) > limits.max_members:
        raise BadArchive(f"{MANIFEST} lists {len(manifest.members)} members, more than {limits.max_members}")
    for m in manifest.members:
        check_name(m.name)
        if m.name == MANIFEST or m.name in listed:
            raise BadArchive(f"{MANIFEST} lists member {m.name!r} twice")
        if m.size < 0 or len(m.sha256) != 64:
            raise BadArchive(f"{MANIFEST}: member {m.name!r} has a bad size or SHA-256")
        listed[m.name] = m
    return listed


def _drain(stream: _Bounded) -> None:
    """Read past the tar's end to the end of the gzip stream, so its CRC and length are checked (a flipped byte
    after the last member, or data glued on, is found); anything but the tar's zero padding there is refused."""
    while chunk := stream.read(_CHUNK):
        if chunk.strip(b"\0"):
            raise BadArchive("data after the end of the tar archive")


def _check_contents(archive: Archive) -> None:
    """The manifest's entries match the members: each topic's records decode, their count, partitions and
    tombstones are as stated, one per key; every member belongs to an entry."""
    m = archive.manifest
    owned: set[str] = set()
    for topic in m.topics:
        if topic.name in archive.records:
            raise BadArchive(f"{MANIFEST} lists topic {topic.name!r} twice")
        if topic.member != topic_member(topic.name):
            raise BadArchive(
                f"topic {topic.name!r}: its records are in {topic_member(topic.name)!r}, not {topic.member!r}"
            )
        if topic.member not in archive.members:
            raise BadArchive(f"topic {topic.name!r}: member {topic.member!r} is not in the archive")
        records = decode_records(topic.member, archive.members[topic.member])
        _check_records(topic.name, topic.member, records, topic.partitions, topic.records, topic.tombstones)
        archive.records[topic.name] = records
        owned.add(topic.member)
    for cfg in m.configs:
        _under(CONFIGS_DIR, cfg.member)
        owned.add(cfg.member)
    for ckpt in m.checkpoints:
        for name in ckpt.members:
            _under(CHECKPOINTS_DIR, name)
        owned.update(ckpt.members)
    for name in owned:
        if name not in archive.members:
            raise BadArchive(f"{MANIFEST} refers to member {name!r}, which is not in the archive")
    stray = sorted(set(archive.members) - owned)
    if stray:
        raise BadArchive(f"member {stray[0]!r} belongs to no topic, config or checkpoint of {MANIFEST}")


def _under(folder: str, name: str) -> None:
    if not name.startswith(folder + "/"):
        raise BadArchive(f"{MANIFEST}: member {name!r} should be under {folder}/")


def _check_records(
    topic: str, member: str, records: list[Record], partitions: int, count: int, tombstones: int
) -> None:
    if len(records) != count:
        raise BadArchive(f"{member}: {MANIFEST} says {count} records of {topic}, the member holds {len(records)}")
    dead = sum(1 for r in records if r.value is None)
    if dead != tombstones:
        raise BadArchive(f"{member}: {MANIFEST} says {tombstones} tombstones, the member holds {dead}")
    last: dict[int, int] = {}
    keys: set[tuple[int, bytes]] = set()
    for r in records:
        if not 0 <= r.partition < partitions:
            raise BadArchive(f"{member}: a record of partition {r.partition}; {topic} has {partitions} partitions")
        if r.offset <= last.get(r.partition, -1):
            raise BadArchive(f"{member}: offsets of partition {r.partition} are not increasing at {r.offset}")
        last[r.partition] = r.offset
        if r.key is not None:
            if (r.partition, r.key) in keys:
                raise BadArchive(f"{member}: key {r.key[:80]!r} appears twice in partition {r.partition}")
            keys.add((r.partition, r.key))
