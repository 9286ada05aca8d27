"""Reading the frames of one segment file, stepping over damage to the next good frame.

A frame that fails its checks (bad magic, a length past the end, a CRC mismatch, a body that does not
decode) is reported as :class:`Damage` and the reader looks for the next offset where a whole valid frame
starts (its magic, a sane header and a matching CRC), so one flipped bit costs one frame. Damage that runs
to the end of the data and is cut short there (a short header, or a body the file does not hold) is marked
``torn``: the trace of a write the process or the machine did not finish.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from myolo.agent.spool.record import HEADER, MAGIC, CorruptFrame, SpoolRecord, check_body, unpack_header

_CHUNK = 64 << 10


class ShortFrame(CorruptFrame):
    """The frame would run past the end of the data: a write cut short, or a damaged length."""


@dataclass
class Segment:
    """What the spool knows of one segment file."""

    path: Path
    first_seq: int  # from the file name
    last_seq: int  # of its last good frame; first_seq - 1 while empty
    size: int  # bytes up to the end of the last good frame: readers never look past it
    holes: list[tuple[int, int]] = field(default_factory=list)  # seq ranges inside it lost to damage
    damaged: dict[int, int] = field(default_factory=dict)  # known damaged byte ranges, start -> end


@dataclass(frozen=True)
class Frame:
    seq: int
    record: SpoolRecord
    start: int
    end: int


@dataclass(frozen=True)
class Damage:
    """Bytes ``[start, end)`` hold no valid frame; ``end`` is where the next good frame (``after``) starts,
    or the end of the data when ``after`` is None."""

    start: int
    end: int
    reason: str
    torn: bool
    after: Frame | None


class SegmentFile:
    """One segment opened for reading up to ``size`` bytes (what the spool knows to be written)."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.size = size
        self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)

    def __enter__(self) -> SegmentFile:
        return self

    def __exit__(self, *_exc: object) -> None:
        os.close(self._fd)

    def frames(self, start: int, skip: dict[int, int] | None = None) -> Iterator[Frame | Damage]:
        """Every frame from ``start`` in file order; each damaged stretch once, then the frame after it.
        ``skip`` maps the start of damage already known to its end: it is stepped over silently."""
        offset = start
        while offset < self.size:
            if skip and offset in skip:
                offset = skip[offset]
                continue
            try:
                frame = self.frame_at(offset)
            except CorruptFrame as exc:
                after = self.next_good(offset + 1)
                end = after.start if after is not None else self.size
                yield Damage(offset, end, str(exc), isinstance(exc, ShortFrame) and after is None, after)
                if after is None:
                    return
                frame = after
            yield frame
            offset = frame.end

    def frame_at(self, offset: int) -> Frame:
        """The whole valid frame starting at ``offset``, or :class:`CorruptFrame` saying why not."""
        if self.size - offset < HEADER.size:
            raise ShortFrame("short header")
        length, crc, seq = unpack_header(os.pread(self._fd, HEADER.size, offset))
        body_at = offset + HEADER.size
        if body_at + length > self.size:
            raise ShortFrame(f"body of {length} bytes runs past the end")
        body = os.pread(self._fd, length, body_at)
        return Frame(seq, check_body(seq, crc, body, length), offset, body_at + length)

    def next_good(self, start: int) -> Frame | None:
        """The first whole valid frame at or after ``start``, or None: the resynchronisation after damage."""
        pos = start
        while pos < self.size:
            chunk = os.pread(self._fd, min(_CHUNK, self.size - pos), pos)
            if not chunk:
                return None
            hit = chunk.find(MAGIC)
            while hit >= 0:
                try:
                    return self.frame_at(pos + hit)
                except CorruptFrame:
                    hit = chunk.find(MAGIC, hit + 1)
            # keep the last byte: a magic may straddle two chunks
            pos += max(1, len(chunk) - (len(MAGIC) - 1))
        return None


def overlap(a: int, b: int, lo: int, hi: int) -> int:
    """How many of the seqs ``a..b`` lie in ``lo < seq <= hi``."""
    return max(0, min(b, hi) - max(a, lo + 1) + 1)


def records_between(seg: Segment, lo: int, hi: int) -> int:
    """Records of ``seg`` with ``lo < seq <= hi`` (those lost to damage are not records)."""
    return overlap(seg.first_seq, seg.last_seq, lo, hi) - sum(overlap(a, b, lo, hi) for a, b in seg.holes)
