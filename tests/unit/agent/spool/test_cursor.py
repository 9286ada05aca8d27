"""The cursor: a damaged or implausible one costs duplicates (sending again from the oldest record on disk),
never a record; a good one, including the checksum-less cursor of an earlier agent, is followed."""

from __future__ import annotations

import pytest

from myolo.agent.spool import cursor
from tests.support.agent.spoolkit import drain, flip, frames_on_disk, make, rec, record_id

N = 300
SENT = 100


def half_sent(tmp_path):
    """Records 0..N-1 written, the first SENT acknowledged, the spool closed; returns its folder."""
    sp = make(tmp_path)
    for i in range(N):
        sp.append(rec(i))
    while sp.committed < SENT:
        sp.commit(sp.peek(SENT - sp.committed)[-1])
    sp.close()
    return tmp_path / "spool"


@pytest.mark.parametrize(
    "damage",
    ["one flipped bit", "truncated", "empty", "checksum of another seq", "past the newest record"],
)
def test_a_bad_cursor_sends_again_from_the_oldest_record_and_loses_none(tmp_path, damage):
    d = half_sent(tmp_path)
    path = d / "cursor"
    if damage == "one flipped bit":
        flip(path, 7)
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:5])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "checksum of another seq":
        path.write_bytes(cursor.encode(SENT)[:8] + cursor.encode(SENT + 1)[8:])
    else:
        path.write_bytes(cursor.encode(10_000))  # a valid checksum, but no such record was ever written
    on_disk = [record_id(f) for _, f in frames_on_disk(d)]
    assert on_disk[-1] == N - 1 and on_disk[0] <= SENT  # sent segments are gone; the rest is all there
    sp = make(tmp_path)
    st = sp.stats()
    assert (st.cursor_resets, st.dropped, st.acked_seq) == (1, 0, 0)
    assert sp.pending == len(on_disk)
    assert drain(sp) == on_disk  # every unsent record, after a few already sent ones again


def test_a_good_cursor_is_followed(tmp_path):
    half_sent(tmp_path)
    sp = make(tmp_path)
    assert sp.stats().cursor_resets == 0
    assert drain(sp) == list(range(SENT, N))


def test_the_cursor_of_an_earlier_agent_is_followed_and_rewritten_with_a_checksum(tmp_path):
    d = half_sent(tmp_path)
    (d / "cursor").write_bytes(SENT.to_bytes(8, "big"))  # 8 bytes, no checksum
    sp = make(tmp_path)
    assert sp.stats().cursor_resets == 0
    assert drain(sp) == list(range(SENT, N))
    assert cursor.decode((d / "cursor").read_bytes()) == N and len((d / "cursor").read_bytes()) == 12


def test_records_missing_below_the_oldest_segment_and_above_the_cursor_are_counted(tmp_path):
    d = half_sent(tmp_path)
    segs = sorted(d.glob("seg-*.spool"))
    gone = {record_id(f) for p, f in frames_on_disk(d) if p == segs[0]}
    assert max(gone) >= SENT  # the oldest segment still holds unsent records
    segs[0].unlink()
    sp = make(tmp_path)
    lost = {i for i in gone if i >= SENT}
    assert sp.corrupt_frames == len(lost)
    assert drain(sp) == [i for i in range(SENT, N) if i not in lost]


def test_a_cursor_that_cannot_be_written_is_reported_and_costs_nothing(tmp_path):
    sp = make(tmp_path)
    for i in range(10):
        sp.append(rec(i))
    (tmp_path / "spool" / "cursor").mkdir()  # the cursor's place is taken: every replace fails
    sp.commit(sp.peek(4)[-1])
    assert sp.stats().cursor_error is not None and sp.pending == 6
    (tmp_path / "spool" / "cursor").rmdir()
    sp.commit(sp.peek(2)[-1])
    assert sp.stats().cursor_error is None
    sp.close()
    assert drain(make(tmp_path)) == [6, 7, 8, 9]


def test_a_missing_cursor_with_records_on_disk_sends_them_all_without_alarm(tmp_path):
    first = make(tmp_path)
    for i in range(50):
        first.append(rec(i))
    # the agent died before Kafka acknowledged anything: no cursor was ever written
    assert not (tmp_path / "spool" / "cursor").exists()
    sp = make(tmp_path)
    assert (sp.stats().cursor_resets, sp.dropped) == (0, 0)
    assert drain(sp) == list(range(50))
