"""A durable, bounded, append-only spool of Kafka records: the agent's write-ahead log.

Every event is appended here first and sent to Kafka from here, in order; a record leaves the spool only once
the broker has acknowledged it (``commit``). So when Kafka is away nothing is lost and nothing piles up in
memory: records wait on disk, and only the batch being sent is ever held in RAM.

On disk, ``dir`` holds segment files ``seg-<first seq>.spool`` (frames, see ``record.py``) and ``cursor``
(the highest acknowledged sequence number). Segments are fixed-size chunks, so the size cap is kept by deleting
the oldest segment: the records in it that were never sent are counted in ``dropped`` and logged, because a
silent gap is worse than a known one. On start the segments are scanned, a torn tail is cut off, and sending
resumes after the cursor (records acknowledged but not yet in the cursor may be sent twice: consumers
de-duplicate by event id).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agent.spool.record import HEADER, CorruptFrame, SpoolRecord, check_body, pack, unpack_header
from events.clock import Clock, SystemClock
from events.files import atomic_write, fsync_dir

log = logging.getLogger(__name__)
FsyncPolicy = Literal["always", "interval", "never"]
_PREFIX, _SUFFIX = "seg-", ".spool"


@dataclass
class _Segment:
    path: Path
    first_seq: int
    last_seq: int  # first_seq - 1 while empty
    size: int


@dataclass(frozen=True)
class SpoolEntry:
    """One record handed out by :meth:`Spool.peek`; pass the last one sent to :meth:`Spool.commit`."""

    seq: int
    record: SpoolRecord
    segment_first_seq: int
    end_offset: int


@dataclass(frozen=True)
class SpoolStats:
    pending_records: int
    bytes: int
    max_bytes: int
    segments: int
    appended: int
    committed: int
    dropped: int
    last_seq: int
    acked_seq: int

    def summary(self) -> str:
        """The spool's part of the agent's one-line status (``myolo-agent status``, systemd's STATUS=)."""
        return f"{self.pending_records} pending, {self.dropped} dropped"


class Spool:
    """Append, peek in order, commit after the broker's ack. One event-loop thread uses it; only
    :meth:`sync` may be called from a worker thread (so an fsync never stalls the loop)."""

    def __init__(
        self,
        directory: str | Path,
        *,
        max_bytes: int,
        segment_bytes: int,
        fsync: FsyncPolicy = "interval",
        fsync_interval_s: float = 1.0,
        clock: Clock | None = None,
    ) -> None:
        if segment_bytes * 2 > max_bytes:
            raise ValueError(f"segment_bytes ({segment_bytes}) must be at most half of max_bytes ({max_bytes})")
        self.dir = Path(directory)
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self.fsync = fsync
        self.fsync_interval_s = fsync_interval_s
        self._clock = clock or SystemClock()
        self._segments: list[_Segment] = []
        self._fd: int | None = None
        self._fd_lock = threading.Lock()
        self._dirty = False
        self._last_sync = self._clock.monotonic()
        self._acked = 0
        self._cursor_written = 0
        self._pending = 0
        self._read_seg = 0  # first_seq of the segment holding the first unacknowledged record
        self._read_off = 0
        self.appended = 0
        self.committed = 0
        self.dropped = 0
        self.dir.mkdir(parents=True, exist_ok=True)
        self._recover()

    # -- writing ------------------------------------------------------------------------------------------
    def append(self, record: SpoolRecord, *, sync: bool = False) -> int:
        """Write one record; returns its sequence number. ``sync=True`` forces an fsync (faults use it)."""
        seq = self._next_seq()
        frame = pack(seq, record)
        if len(frame) > self.segment_bytes:
            raise ValueError(f"record of {len(frame)} bytes is larger than a spool segment ({self.segment_bytes})")
        active = self._active_for(len(frame))
        os.write(self._fd, frame)  # type: ignore[arg-type]
        active.last_seq = seq
        active.size += len(frame)
        self._pending += 1
        self.appended += 1
        self._dirty = True
        if sync or self.fsync == "always":
            self.sync()
        self._enforce_cap()
        return seq

    def sync(self) -> None:
        """fsync the active segment if anything was written since the last one. Safe from a worker thread."""
        with self._fd_lock:
            if self._fd is None or not self._dirty:
                return
            self._dirty = False
            try:
                os.fsync(self._fd)
            except OSError as exc:
                log.error("spool fsync failed: %s", exc)
                self._dirty = True
                raise
        self._last_sync = self._clock.monotonic()

    def sync_due(self) -> bool:
        """Whether the ``interval`` policy wants an fsync now."""
        return (
            self.fsync == "interval"
            and self._dirty
            and self._clock.monotonic() - self._last_sync >= self.fsync_interval_s
        )

    # -- reading ------------------------------------------------------------------------------------------
    def peek(self, max_records: int, max_bytes: int = 4 << 20) -> list[SpoolEntry]:
        """The oldest unacknowledged records, in order, without removing them."""
        out: list[SpoolEntry] = []
        total = 0
        for seg in self._segments:
            if seg.first_seq < self._read_seg or seg.last_seq <= self._acked:
                continue
            offset = self._read_off if seg.first_seq == self._read_seg else 0
            with open(seg.path, "rb") as fh:
                fh.seek(offset)
                while len(out) < max_records and total < max_bytes and offset < seg.size:
                    seq, record, end = _read_frame(fh, offset)
                    offset = end
                    if seq <= self._acked:
                        continue
                    out.append(SpoolEntry(seq, record, seg.first_seq, end))
                    total += len(record.value)
            if len(out) >= max_records or total >= max_bytes:
                break
        return out

    def commit(self, entry: SpoolEntry) -> None:
        """Everything up to and including ``entry`` reached Kafka: forget it (deleting whole segments)."""
        if entry.seq <= self._acked:
            return
        done = self._count_between(self._acked, entry.seq)
        self._pending = max(0, self._pending - done)
        self.committed += done
        self._acked = entry.seq
        self._read_seg, self._read_off = entry.segment_first_seq, entry.end_offset
        while len(self._segments) > 1 and self._segments[0].last_seq <= self._acked:
            self._delete(self._segments.pop(0))
        if self._segments and self._segments[0].first_seq > self._read_seg:
            self._read_seg, self._read_off = self._segments[0].first_seq, 0
        self._write_cursor()

    # -- state --------------------------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        return self._pending

    @property
    def bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def stats(self) -> SpoolStats:
        return SpoolStats(
            pending_records=self._pending,
            bytes=self.bytes,
            max_bytes=self.max_bytes,
            segments=len(self._segments),
            appended=self.appended,
            committed=self.committed,
            dropped=self.dropped,
            last_seq=self._next_seq() - 1,
            acked_seq=self._acked,
        )

    def close(self) -> None:
        """fsync (unless ``never``), write the cursor, close the file."""
        if self.fsync != "never":
            self.sync()
        self._write_cursor(force=True)
        with self._fd_lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    # -- internals ----------------------------------------------------------------------------------------
    def _next_seq(self) -> int:
        if self._segments:
            return self._segments[-1].last_seq + 1
        return self._acked + 1

    def _count_between(self, lo: int, hi: int) -> int:
        """Records with ``lo < seq <= hi`` still on disk (dropped ones are gone from the count already)."""
        n = 0
        for seg in self._segments:
            a, b = max(seg.first_seq, lo + 1), min(seg.last_seq, hi)
            if b >= a:
                n += b - a + 1
        return n

    def _active_for(self, frame_len: int) -> _Segment:
        seg = self._segments[-1] if self._segments else None
        if seg is not None and self._fd is not None and (seg.size == 0 or seg.size + frame_len <= self.segment_bytes):
            return seg
        return self._roll()

    def _roll(self) -> _Segment:
        first = self._next_seq()
        path = self.dir / f"{_PREFIX}{first:020d}{_SUFFIX}"
        with self._fd_lock:
            if self._fd is not None:
                if self.fsync != "never" and self._dirty:
                    os.fsync(self._fd)
                os.close(self._fd)
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            self._dirty = False
        if self.fsync != "never":
            fsync_dir(self.dir)
        seg = _Segment(path, first, first - 1, 0)
        if not self._segments:
            self._read_seg, self._read_off = first, 0
        self._segments.append(seg)
        return seg

    def _enforce_cap(self) -> None:
        while self.bytes > self.max_bytes and len(self._segments) > 1:
            lost = self._count_between(self._acked, self._segments[0].last_seq)
            seg = self._segments.pop(0)
            self._pending -= lost
            self.dropped += lost
            self._acked = max(self._acked, seg.last_seq)
            self._delete(seg)
            nxt = self._segments[0]
            if self._read_seg < nxt.first_seq:
                self._read_seg, self._read_off = nxt.first_seq, 0
            log.warning(
                "spool over its cap of %d bytes: dropped the oldest segment with %d unsent events "
                "(seq %d..%d); %d dropped in all",
                self.max_bytes,
                lost,
                seg.first_seq,
                seg.last_seq,
                self.dropped,
            )
            self._write_cursor(force=True)

    def _delete(self, seg: _Segment) -> None:
        with contextlib.suppress(FileNotFoundError):
            seg.path.unlink()

    def _write_cursor(self, force: bool = False) -> None:
        if self._acked == self._cursor_written and not force:
            return
        atomic_write(self.dir / "cursor", self._acked.to_bytes(8, "big"), durable=False)
        self._cursor_written = self._acked

    def _recover(self) -> None:
        cursor = self.dir / "cursor"
        if cursor.exists():
            raw = cursor.read_bytes()
            self._acked = int.from_bytes(raw[:8], "big") if len(raw) >= 8 else 0
        self._cursor_written = self._acked
        paths = sorted(p for p in self.dir.glob(f"{_PREFIX}*{_SUFFIX}") if p.stem[len(_PREFIX) :].isdigit())
        for path in paths:
            seg = _scan(path)
            if seg.last_seq <= self._acked or seg.size == 0:
                self._delete(seg)
                continue
            self._segments.append(seg)
        if self._segments:
            # appends continue in the last segment; the cap and rotation treat it like any other
            last = self._segments[-1]
            self._fd = os.open(last.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
            self._read_seg, self._read_off = self._segments[0].first_seq, 0
            self._pending = self._count_between(self._acked, last.last_seq)
            log.info("spool recovered %d unsent events in %d segments", self._pending, len(self._segments))


def _read_frame(fh, offset: int) -> tuple[int, SpoolRecord, int]:
    length, crc, seq = unpack_header(fh.read(HEADER.size))
    record = check_body(seq, crc, fh.read(length), length)
    return seq, record, offset + HEADER.size + length


def _scan(path: Path) -> _Segment:
    """Validate every frame; cut the file back to its last whole frame if the tail is torn."""
    first = int(path.stem[len(_PREFIX) :])
    last, good = first - 1, 0
    size = path.stat().st_size
    with open(path, "rb") as fh:
        while good < size:
            try:
                seq, _, end = _read_frame(fh, good)
            except CorruptFrame as exc:
                log.warning("spool segment %s: cutting %d bytes after a bad frame (%s)", path.name, size - good, exc)
                break
            last, good = seq, end
    if good < size:
        os.truncate(path, good)
    return _Segment(path, first, last, good)
