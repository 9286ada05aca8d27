"""What a starting spool finds on disk: the cursor, each segment's good frames, and what was lost.

Every segment is scanned frame by frame (``segment.py``), so damage anywhere is found now and counted once:
records missing between good frames, or between one segment's last good frame and the next segment's first
sequence number, are ``corrupt_frames``. The newest segment is cut back to its last good frame so appends
continue on whole frames; a tail that is a frame cut short is a ``torn`` write (a crash while writing), other
bytes there are at least one damaged frame. The cursor is trusted only when its checksum holds and it does not
point past the newest record on disk; otherwise sending restarts from the oldest record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from myolo.agent.spool import cursor
from myolo.agent.spool.segment import Damage, Segment, SegmentFile, overlap

log = structlog.get_logger("myolo.agent.spool")
PREFIX, SUFFIX = "seg-", ".spool"
_NO_LIMIT = 1 << 64


@dataclass
class Recovered:
    acked: int
    cursor_problem: str | None
    segments: list[Segment] = field(default_factory=list)  # in order, empty ones left out (and deleted)
    corrupt_frames: int = 0
    torn_tails: int = 0


def segment_path(directory: Path, first_seq: int) -> Path:
    return directory / f"{PREFIX}{first_seq:020d}{SUFFIX}"


def recover(directory: Path) -> Recovered:
    acked, problem = cursor.read(directory / "cursor")
    paths = sorted(p for p in directory.glob(f"{PREFIX}*{SUFFIX}") if p.stem[len(PREFIX) :].isdigit())
    scans = [_scan(p, int(p.stem[len(PREFIX) :])) for p in paths]
    newest = max((seg.last_seq for seg, _ in scans if seg.last_seq >= seg.first_seq), default=None)
    if problem is None and newest is not None and acked > newest:
        problem = f"cursor {acked} points past the newest record on disk ({newest})"
    if problem is not None:
        acked = 0
        log.warning("spool cursor not trusted: sending again from the oldest record", reason=problem)
    found = Recovered(acked, problem)
    if scans and problem is None:
        # the cursor is written before sent segments are deleted: records missing below the oldest segment
        # and above the cursor were never sent
        found.corrupt_frames += overlap(acked + 1, scans[0][0].first_seq - 1, acked, _NO_LIMIT)
    for i, (seg, tail) in enumerate(scans):
        found.corrupt_frames += sum(overlap(a, b, acked, _NO_LIMIT) for a, b in seg.holes)
        if i + 1 < len(scans):
            # everything up to the next segment's first seq should be here: what is not was lost
            found.corrupt_frames += overlap(seg.last_seq + 1, scans[i + 1][0].first_seq - 1, acked, _NO_LIMIT)
        elif tail is not None:
            _cut_tail(seg, tail, found)
        if seg.last_seq < seg.first_seq:
            seg.path.unlink(missing_ok=True)
            continue
        found.segments.append(seg)
    return found


def _scan(path: Path, first_seq: int) -> tuple[Segment, Damage | None]:
    """The segment's good frames; damage in the middle is remembered, damage to the end returned."""
    seg = Segment(path, first_seq, first_seq - 1, 0)
    with SegmentFile(path, path.stat().st_size) as fh:
        for item in fh.frames(0):
            if isinstance(item, Damage):
                log.error(
                    "spool segment damaged",
                    segment=path.name,
                    offset=item.start,
                    bytes=item.end - item.start,
                    reason=item.reason,
                    torn=item.torn,
                )
                if item.after is None:
                    return seg, item
                seg.damaged[item.start] = item.end
                continue
            if item.seq <= seg.last_seq:
                continue  # a valid frame out of order is not one of ours here: skipped by readers too
            if item.seq > seg.last_seq + 1:
                seg.holes.append((seg.last_seq + 1, item.seq - 1))
            seg.last_seq, seg.size = item.seq, item.end
    return seg, None


def _cut_tail(seg: Segment, tail: Damage, found: Recovered) -> None:
    """Cut the newest segment back to its last good frame, so appends continue on whole frames."""
    os.truncate(seg.path, seg.size)
    if tail.torn:
        found.torn_tails += 1
    else:
        found.corrupt_frames += 1  # at least one frame; nothing after it tells how many
    log.warning(
        "spool cut the newest segment back to its last good frame",
        segment=seg.path.name,
        bytes=tail.end - tail.start,
        torn=tail.torn,
    )
