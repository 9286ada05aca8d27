"""Damaged segments: bit flips, zeroed blocks, truncation and lost files cost exactly the frames they touch,
and every lost record is counted. 300 records are written, the files are damaged, the spool is reopened with
the project's classes and drained as the publisher does; the records that come back are checked one by one."""

from __future__ import annotations

import os

import pytest

from myolo.agent.spool.record import HEADER
from tests.support.agent.spoolkit import drain, flip, frames_on_disk, make, rec, record_id, segments, written

N = 300
# where in a frame one bit is flipped: magic | length(4) | crc32(4) | seq(8) | body
PLACES = {"magic": 0, "length": 5, "crc": 6, "seq": 17, "body": HEADER.size + 40}


def expect_lost(spool_dir, lost: set[int], *, corrupt: int | None = None) -> None:
    """Reopen, drain, and check exactly ``lost`` is missing and counted."""
    sp = make(spool_dir.parent)
    st = sp.stats()
    assert st.corrupt_frames == (len(lost) if corrupt is None else corrupt)
    assert st.dropped == st.corrupt_frames and st.over_cap == 0 and st.failed_writes == 0
    assert sp.pending == N - len(lost)
    assert drain(sp) == [i for i in range(N) if i not in lost]
    assert sp.pending == 0 and sp.committed == N - len(lost)


def pick(spool_dir, which: str) -> tuple:
    """(segment, frame) of a frame at a telling position."""
    frames = frames_on_disk(spool_dir)
    segs = segments(spool_dir)
    assert len(segs) >= 4, "the records must span several segments"
    in_seg = {s: [f for p, f in frames if p == s] for s in segs}
    chosen = {
        "middle": (segs[len(segs) // 2], in_seg[segs[len(segs) // 2]][len(in_seg[segs[len(segs) // 2]]) // 2]),
        "first of a segment": (segs[2], in_seg[segs[2]][0]),
        "last of an older segment": (segs[1], in_seg[segs[1]][-1]),
        "last of all": (segs[-1], in_seg[segs[-1]][-1]),
    }
    return chosen[which]


WHERE = ["middle", "first of a segment", "last of an older segment", "last of all"]
# a damaged length in the newest frame: two tests of its own below (it may read as a torn write)
CASES = [(w, p) for w in WHERE for p in sorted(PLACES) if (w, p) != ("last of all", "length")]


@pytest.mark.parametrize(("which", "place"), CASES)
def test_one_flipped_bit_costs_exactly_one_record(tmp_path, which, place):
    d = written(tmp_path, N)
    seg, frame = pick(d, which)
    flip(seg, frame.start + PLACES[place])
    expect_lost(d, {record_id(frame)})


def test_a_length_in_the_newest_frame_damaged_beyond_any_frame_costs_one_record(tmp_path):
    d = written(tmp_path, N)
    seg, frame = pick(d, "last of all")
    flip(seg, frame.start + 2, bit=7)  # top bit of the length: above the largest body a frame may have
    expect_lost(d, {N - 1})


def test_a_length_in_the_newest_frame_damaged_past_the_end_reads_as_a_torn_write(tmp_path):
    # a length that now runs past the end of the file looks exactly like a write the crash cut short: the
    # frame is cut off as a torn tail (counted there), not as a corrupt frame
    d = written(tmp_path, N)
    seg, frame = pick(d, "last of all")
    flip(seg, frame.start + 3)  # +64 KiB: past the end of the file, below the largest body
    sp = make(tmp_path)
    st = sp.stats()
    assert (st.torn_tails, st.corrupt_frames, st.dropped) == (1, 0, 0)
    assert drain(sp) == list(range(N - 1))


def test_flips_in_two_segments_cost_two_records(tmp_path):
    d = written(tmp_path, N)
    a, fa = pick(d, "middle")
    b, fb = pick(d, "first of a segment")
    flip(a, fa.start + PLACES["body"])
    flip(b, fb.start + PLACES["crc"])
    expect_lost(d, {record_id(fa), record_id(fb)})


def test_a_zeroed_block_costs_the_frames_it_touches(tmp_path):
    d = written(tmp_path, N)
    seg, frame = pick(d, "middle")
    start, length = frame.start + 30, 400  # from inside one frame across the next two or three
    touched = {record_id(f) for p, f in frames_on_disk(d) if p == seg and f.start < start + length and f.end > start}
    assert len(touched) >= 3
    data = bytearray(seg.read_bytes())
    data[start : start + length] = bytes(length)
    seg.write_bytes(bytes(data))
    expect_lost(d, touched)


def test_an_older_segment_cut_short_loses_only_what_was_cut(tmp_path):
    d = written(tmp_path, N)
    seg, frame = pick(d, "middle")
    cut = frame.start + 7
    gone = {record_id(f) for p, f in frames_on_disk(d) if p == seg and f.end > cut}
    os.truncate(seg, cut)
    expect_lost(d, gone)


def test_an_older_segment_overwritten_with_garbage_loses_its_records_only(tmp_path):
    d = written(tmp_path, N)
    seg = segments(d)[3]
    gone = {record_id(f) for p, f in frames_on_disk(d) if p == seg}
    seg.write_bytes(os.urandom(seg.stat().st_size))
    expect_lost(d, gone)
    assert not seg.exists()  # nothing readable was left in it


def test_a_lost_segment_file_is_counted(tmp_path):
    d = written(tmp_path, N)
    seg = segments(d)[4]
    gone = {record_id(f) for p, f in frames_on_disk(d) if p == seg}
    seg.unlink()
    expect_lost(d, gone)


def test_a_torn_last_frame_is_cut_off_and_the_rest_is_kept(tmp_path):
    d = written(tmp_path, 5)
    seg = segments(d)[-1]
    whole = seg.stat().st_size
    with open(seg, "ab") as fh:
        fh.write(b"\xa7\x5e\x00\x00\x01\x00garbage")  # a header promising 256 bytes, then the power went
    sp = make(tmp_path)
    st = sp.stats()
    assert (st.torn_tails, st.dropped, sp.pending) == (1, 0, 5)
    assert seg.stat().st_size == whole
    assert sp.append(rec(5)) == 6
    assert drain(sp) == [0, 1, 2, 3, 4, 5]


def test_the_newest_frame_cut_mid_write_is_a_torn_tail_and_numbering_goes_on(tmp_path):
    d = written(tmp_path, N)
    seg, frame = pick(d, "last of all")
    os.truncate(seg, frame.start + HEADER.size + 10)
    sp = make(tmp_path)
    st = sp.stats()
    assert (st.torn_tails, st.dropped, sp.pending) == (1, 0, N - 1)
    assert seg.stat().st_size == frame.start
    assert sp.append(rec(N)) == N  # the cut record's number is taken by the next one
    assert drain(sp) == [*range(N - 1), N]


def test_damage_that_appears_under_a_running_spool_costs_one_record(tmp_path):
    sp = make(tmp_path)
    for i in range(N):
        sp.append(rec(i))
    d = tmp_path / "spool"
    seg, frame = pick(d, "middle")
    flip(seg, frame.start + PLACES["body"])
    got = drain(sp)
    assert got == [i for i in range(N) if i != record_id(frame)]
    st = sp.stats()
    assert (st.corrupt_frames, st.dropped, st.pending_records, st.committed) == (1, 1, 0, N - 1)
    # found once: reading the same place again does not count it again
    assert drain(sp) == [] and sp.corrupt_frames == 1


def test_damage_under_a_running_spool_before_anything_was_read(tmp_path):
    sp = make(tmp_path)
    for i in range(N):
        sp.append(rec(i))
    d = tmp_path / "spool"
    first = segments(d)[0]
    lost = [f for p, f in frames_on_disk(d) if p == first][:2]
    flip(first, lost[0].start)  # the very first frame the sender will read ...
    flip(first, lost[1].start + PLACES["body"])  # ... and the one after it
    assert drain(sp) == list(range(2, N))
    assert sp.corrupt_frames == 2 and sp.pending == 0


def test_a_segment_file_removed_under_a_running_spool_is_counted(tmp_path):
    sp = make(tmp_path)
    for i in range(N):
        sp.append(rec(i))
    seg = segments(tmp_path / "spool")[2]
    gone = {record_id(f) for p, f in frames_on_disk(tmp_path / "spool") if p == seg}
    seg.unlink()
    assert drain(sp) == [i for i in range(N) if i not in gone]
    assert sp.corrupt_frames == len(gone) and sp.pending == 0


def test_the_newest_segment_removed_under_a_running_spool_new_records_still_land(tmp_path):
    sp = make(tmp_path)
    for i in range(N):
        sp.append(rec(i))
    seg = segments(tmp_path / "spool")[-1]
    gone = {record_id(f) for p, f in frames_on_disk(tmp_path / "spool") if p == seg}
    seg.unlink()
    assert drain(sp) == [i for i in range(N) if i not in gone]
    sp.append(rec(N))  # a new segment, not the unlinked file
    assert drain(sp) == [N]
    sp.close()
    assert make(tmp_path).pending == 0
