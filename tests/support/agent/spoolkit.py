"""Helpers for the spool tests: records that say their own number, a spool on a small disk budget, and the
frames as they lie on disk (read with the project's own segment reader), to damage them on purpose."""

from __future__ import annotations

from pathlib import Path

from myolo.agent.spool import Spool, SpoolRecord
from myolo.agent.spool.segment import Frame, SegmentFile

KIB = 1024


def rec(i: int, size: int = 100) -> SpoolRecord:
    return SpoolRecord(
        "myolo.node.samples", f"node-{i % 3}".encode(), str(i).encode().ljust(size, b"."), [("ce_id", str(i).encode())]
    )


def ids(entries) -> list[int]:
    return [int(e.record.value.rstrip(b".")) for e in entries]


def make(tmp_path: Path, **kw) -> Spool:
    args = {"max_bytes": 64 * KIB, "segment_bytes": 4 * KIB, "fsync": "never"}
    args.update(kw)
    return Spool(tmp_path / "spool", **args)


def written(tmp_path: Path, n: int = 300) -> Path:
    """A closed spool holding records 0..n-1, none sent; returns its folder."""
    sp = make(tmp_path)
    for i in range(n):
        sp.append(rec(i))
    assert sp.dropped == 0 and sp.pending == n
    sp.close()
    return tmp_path / "spool"


def segments(spool_dir: Path) -> list[Path]:
    return sorted(spool_dir.glob("seg-*.spool"))


def frames_on_disk(spool_dir: Path) -> list[tuple[Path, Frame]]:
    """Every good frame, in order, with its segment file."""
    out: list[tuple[Path, Frame]] = []
    for path in segments(spool_dir):
        with SegmentFile(path, path.stat().st_size) as fh:
            out += [(path, f) for f in fh.frames(0) if isinstance(f, Frame)]
    return out


def record_id(frame: Frame) -> int:
    return int(frame.record.value.rstrip(b"."))


def flip(path: Path, offset: int, bit: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 1 << bit
    path.write_bytes(bytes(data))


def drain(sp: Spool, batch: int = 37) -> list[int]:
    """Read and commit everything, as the publisher does; the record numbers in the order read."""
    got: list[int] = []
    while batch_entries := sp.peek(batch):
        got += ids(batch_entries)
        sp.commit(batch_entries[-1])
    return got
