"""A durable, bounded, append-only spool of Kafka records: the agent's write-ahead log.

Every event is appended here first and sent to Kafka from here, in order; a record leaves the spool only once
the broker has acknowledged it (``commit``). So when Kafka is away nothing is lost and nothing piles up in
memory: records wait on disk, and only the batch being sent is ever held in RAM.

On disk, ``dir`` holds segment files ``seg-<first seq>.spool`` (frames, see ``record.py``) and ``cursor``
(the highest acknowledged sequence number, checksummed). Nothing is lost without being counted
(:class:`SpoolStats`): the size cap deletes the oldest segment and counts its unsent records; a write the
disk refuses is undone and counted; a damaged frame is stepped over (``segment.py``) and the records missing
between the good frames around it are counted as ``corrupt_frames``. On start the segments are scanned and a
torn tail of the newest one is cut off. A cursor that fails its checksum, or points past the newest record on
disk, is not trusted: sending starts again from the oldest record (consumers de-duplicate by event id), so a
bad cursor costs duplicates, never records.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import structlog

from myolo.agent.spool import cursor
from myolo.agent.spool.fsync import FsyncPolicy, FsyncSchedule
from myolo.agent.spool.record import SpoolRecord, pack
from myolo.agent.spool.recovery import recover, segment_path
from myolo.agent.spool.segment import Damage, Segment, SegmentFile, records_between
from myolo.agent.spool.stats import SpoolStats
from myolo.common.clock import Clock, SystemClock
from myolo.common.files import fsync_dir

log = structlog.get_logger("myolo.agent.spool")


@dataclass(frozen=True)
class SpoolEntry:
    """One record handed out by :meth:`Spool.peek`; pass the last one sent to :meth:`Spool.commit`."""

    seq: int
    record: SpoolRecord
    segment_first_seq: int
    end_offset: int


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
        self._segments: list[Segment] = []
        self._fd: int | None = None
        self._fd_lock = threading.Lock()
        self._fsync = FsyncSchedule(fsync, fsync_interval_s, self._clock)
        self._acked = 0
        self._cursor_written = 0
        self._pending = 0
        self._read_seg = 0  # first_seq of the segment holding the first unacknowledged record
        self._read_off = 0
        self.appended = 0
        self.committed = 0
        self.over_cap = 0
        self.corrupt_frames = 0
        self.failed_writes = 0
        self.torn_tails = 0
        self.cursor_resets = 0
        self.cursor_error: str | None = None
        self._cursor = cursor.CursorFile(self.dir / "cursor")
        self.dir.mkdir(parents=True, exist_ok=True)
        self._recover()

    # -- writing ------------------------------------------------------------------------------------------
    def append(self, record: SpoolRecord, *, sync: bool = False) -> int:
        """Write one record; returns its sequence number. ``sync=True`` forces an fsync (faults use it).

        A write the disk refuses (``OSError``, e.g. disk full) is undone, counted in ``failed_writes`` and
        raised: the record is not in the spool and its sequence number is used by the next one."""
        seq = self._next_seq()
        frame = pack(seq, record)
        if len(frame) > self.segment_bytes:
            raise ValueError(f"record of {len(frame)} bytes is larger than a spool segment ({self.segment_bytes})")
        try:
            active = self._active_for(len(frame))
            _write_all(self._fd, frame)  # type: ignore[arg-type]
        except OSError as exc:
            self.failed_writes += 1
            self._undo_partial_write()
            log.error("spool write failed: event lost", seq=seq, bytes=len(frame), error=str(exc))
            raise
        active.last_seq = seq
        active.size += len(frame)
        self._pending += 1
        self.appended += 1
        self._fsync.dirty = True
        if sync or self.fsync == "always":
            self.sync()
        self._enforce_cap()
        return seq

    def sync(self) -> None:
        """fsync the active segment if anything was written since the last one. Safe from a worker thread."""
        with self._fd_lock:
            if self._fd is None or not self._fsync.dirty:
                return
            self._fsync.dirty = False
            try:
                os.fsync(self._fd)
            except OSError as exc:
                log.error("spool fsync failed", error=str(exc))
                self._fsync.dirty = True
                raise
        self._fsync.synced()

    def sync_due(self) -> bool:
        """Whether the ``interval`` policy wants an fsync now."""
        return self._fsync.due()

    # -- reading ------------------------------------------------------------------------------------------
    def peek(self, max_records: int, max_bytes: int = 4 << 20) -> list[SpoolEntry]:
        """The oldest unacknowledged records, in order, without removing them.

        Damage found here (the disk changed under a segment since it was written or scanned) is stepped over
        and counted; a segment file that vanished is counted as lost. Other read errors (``OSError``) are
        raised: the caller retries later."""
        out: list[SpoolEntry] = []
        total = 0
        for seg in list(self._segments):
            if seg.first_seq < self._read_seg or seg.last_seq <= self._acked:
                continue
            offset = self._read_off if seg.first_seq == self._read_seg else 0
            prev = max(self._acked, seg.first_seq - 1)
            try:
                reader = SegmentFile(seg.path, seg.size)
            except FileNotFoundError:
                self._lose_segment(seg)
                continue
            with reader:
                for item in reader.frames(offset, seg.damaged):
                    if isinstance(item, Damage):
                        self._damage_found(seg, item, prev)
                        continue
                    if item.seq <= prev:
                        continue  # acknowledged already (or a stray frame out of order)
                    prev = item.seq
                    out.append(SpoolEntry(item.seq, item.record, seg.first_seq, item.end))
                    total += len(item.record.value)
                    if len(out) >= max_records or total >= max_bytes:
                        return out
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
        # the cursor first: on disk, records missing below the oldest segment are then always acknowledged ones
        self._write_cursor()
        while len(self._segments) > 1 and self._segments[0].last_seq <= self._acked:
            self._delete(self._segments.pop(0))
        if self._segments and self._segments[0].first_seq > self._read_seg:
            self._read_seg, self._read_off = self._segments[0].first_seq, 0

    # -- state --------------------------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        return self._pending

    @property
    def dropped(self) -> int:
        """Records lost for any reason: the cap, a refused write, damage on disk."""
        return self.over_cap + self.failed_writes + self.corrupt_frames

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
            over_cap=self.over_cap,
            corrupt_frames=self.corrupt_frames,
            failed_writes=self.failed_writes,
            torn_tails=self.torn_tails,
            cursor_resets=self.cursor_resets,
            cursor_error=self.cursor_error,
            last_seq=self._next_seq() - 1,
            acked_seq=self._acked,
        )

    def close(self) -> None:
        """fsync (unless ``never``), write the cursor, close the file."""
        if self.fsync != "never":
            self.sync()
        self._write_cursor(force=True)
        self._cursor.close()
        with self._fd_lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    # -- internals ----------------------------------------------------------------------------------------
    def _next_seq(self) -> int:
        if self._segments:
            return max(self._segments[-1].last_seq, self._acked) + 1
        return self._acked + 1

    def _count_between(self, lo: int, hi: int) -> int:
        """Records with ``lo < seq <= hi`` still on disk (dropped and damaged ones are not counted)."""
        return sum(records_between(seg, lo, hi) for seg in self._segments)

    def _active_for(self, frame_len: int) -> Segment:
        seg = self._segments[-1] if self._segments else None
        if seg is not None and self._fd is not None and (seg.size == 0 or seg.size + frame_len <= self.segment_bytes):
            return seg
        return self._roll()

    def _roll(self) -> Segment:
        first = self._next_seq()
        path = segment_path(self.dir, first)
        with self._fd_lock:
            if self._fd is not None:
                if self.fsync != "never" and self._fsync.dirty:
                    os.fsync(self._fd)
                os.close(self._fd)
                self._fd = None
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            self._fsync.dirty = False
        seg = Segment(path, first, first - 1, 0)
        if not self._segments:
            self._read_seg, self._read_off = first, 0
        self._segments.append(seg)
        if self.fsync != "never":
            fsync_dir(self.dir)  # last: should it fail, the new segment is already the active one
        return seg

    def _undo_partial_write(self) -> None:
        """Cut the active segment back to its last whole frame; if even that fails, write the next record
        to a new segment (readers never look past a segment's known size, and a restart steps over it)."""
        if self._fd is None or not self._segments:
            return
        try:
            os.ftruncate(self._fd, self._segments[-1].size)
        except OSError as exc:
            log.error("spool cannot cut a failed write back; next record opens a new segment", error=str(exc))
            with self._fd_lock:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None

    def _enforce_cap(self) -> None:
        while self.bytes > self.max_bytes and len(self._segments) > 1:
            seg = self._segments.pop(0)
            lost = records_between(seg, self._acked, seg.last_seq)
            self._pending -= lost
            self.over_cap += lost
            self._acked = max(self._acked, seg.last_seq)
            self._write_cursor(force=True)
            self._delete(seg)
            nxt = self._segments[0]
            if self._read_seg < nxt.first_seq:
                self._read_seg, self._read_off = nxt.first_seq, 0
            log.warning(
                "spool over its cap: dropped the oldest segment",
                max_bytes=self.max_bytes,
                unsent=lost,
                first_seq=seg.first_seq,
                last_seq=seg.last_seq,
                over_cap=self.over_cap,
            )

    def _damage_found(self, seg: Segment, damage: Damage, prev: int) -> None:
        """Damage seen while reading: count the records missing between the good frames around it, once."""
        seg.damaged[damage.start] = damage.end
        upto = damage.after.seq - 1 if damage.after is not None else seg.last_seq
        lost = max(0, upto - prev)
        if lost:
            seg.holes.append((prev + 1, upto))
            self._pending = max(0, self._pending - lost)
            self.corrupt_frames += lost
        log.error(
            "spool frame damaged: stepped over it",
            segment=seg.path.name,
            offset=damage.start,
            bytes=damage.end - damage.start,
            reason=damage.reason,
            lost=lost,
            corrupt_frames=self.corrupt_frames,
        )

    def _lose_segment(self, seg: Segment) -> None:
        lost = records_between(seg, self._acked, seg.last_seq)
        active = seg is self._segments[-1]
        self._segments.remove(seg)
        self._pending = max(0, self._pending - lost)
        self.corrupt_frames += lost
        if active:  # the next append opens a new segment instead of writing to a file nobody can read
            with self._fd_lock:
                if self._fd is not None:
                    os.close(self._fd)
                    self._fd = None
        log.error("spool segment vanished", segment=seg.path.name, lost=lost, corrupt_frames=self.corrupt_frames)

    def _delete(self, seg: Segment) -> None:
        """Delete a segment that is sent or dropped; one left behind is deleted on the next start."""
        try:
            seg.path.unlink(missing_ok=True)
        except OSError as exc:
            log.error("spool cannot delete a segment", segment=seg.path.name, error=str(exc))

    def _write_cursor(self, force: bool = False) -> None:
        """A cursor that cannot be written only means records may be sent twice after a restart: it is
        reported (``cursor_error``) and tried again at the next commit, never raised into the sender."""
        if self._acked == self._cursor_written and not force:
            return
        try:
            self._cursor.write(self._acked)
        except OSError as exc:
            if self.cursor_error is None:
                log.error("spool cursor not written: acknowledged records may be sent again", error=str(exc))
            self.cursor_error = f"cannot write the spool cursor: {exc.strerror or exc}"
            return
        self.cursor_error = None
        self._cursor_written = self._acked

    def _recover(self) -> None:
        found = recover(self.dir)
        self._acked = found.acked
        self._cursor_written = found.acked if found.cursor_problem is None else -1
        self.corrupt_frames += found.corrupt_frames
        self.torn_tails += found.torn_tails
        self.cursor_resets += found.cursor_problem is not None
        for seg in found.segments:
            if seg.last_seq <= self._acked:
                self._delete(seg)
                continue
            self._segments.append(seg)
        if self._segments:
            # appends continue in the last segment; the cap and rotation treat it like any other
            last = self._segments[-1]
            self._fd = os.open(last.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
            self._read_seg, self._read_off = self._segments[0].first_seq, 0
            self._pending = self._count_between(self._acked, last.last_seq)
            log.info("spool recovered unsent events", pending=self._pending, segments=len(self._segments))


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written: a short write is continued, a write of nothing is an error."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, "write wrote nothing")
        view = view[n:]
