"""The spool: order, durability across restarts, torn writes, the size cap and the fsync policy."""

from __future__ import annotations

import os

import pytest
from structlog.testing import capture_logs

from myolo.agent.spool import Spool
from myolo.common.clock import SimClock
from tests.support.agent.spoolkit import KIB, ids, make, rec


def test_records_come_back_in_order_across_segments_and_commits_forget_them(tmp_path):
    sp = make(tmp_path)
    seqs = [sp.append(rec(i)) for i in range(200)]
    assert seqs == list(range(1, 201))
    assert sp.stats().segments > 3
    got = []
    while batch := sp.peek(37):
        got += ids(batch)
        sp.commit(batch[-1])
    assert got == list(range(200))
    assert sp.pending == 0 and sp.committed == 200
    # fully sent segments are deleted from disk; only the active one remains
    assert len(list((tmp_path / "spool").glob("seg-*"))) == 1


def test_peek_does_not_consume(tmp_path):
    sp = make(tmp_path)
    for i in range(5):
        sp.append(rec(i))
    assert ids(sp.peek(3)) == [0, 1, 2]
    assert ids(sp.peek(10)) == [0, 1, 2, 3, 4]
    sp.commit(sp.peek(2)[-1])
    assert ids(sp.peek(10)) == [2, 3, 4]


def test_unsent_records_survive_a_restart_and_sent_ones_are_not_resent(tmp_path):
    sp = make(tmp_path)
    for i in range(50):
        sp.append(rec(i))
    sp.commit(sp.peek(20)[-1])
    sp.close()
    again = make(tmp_path)
    assert again.pending == 30
    assert ids(again.peek(100)) == list(range(20, 50))
    # numbering continues after the restart, so order is kept with new records
    assert again.append(rec(50)) == 51
    assert ids(again.peek(100))[-1] == 50


def test_a_crash_without_close_loses_nothing_written(tmp_path):
    sp = make(tmp_path)
    for i in range(10):
        sp.append(rec(i))
    # no close(): the process died; the OS still has every write
    again = make(tmp_path)
    assert ids(again.peek(100)) == list(range(10))


def test_the_cap_drops_the_oldest_unsent_records_counts_and_logs_them(tmp_path):
    sp = make(tmp_path, max_bytes=16 * KIB, segment_bytes=4 * KIB)
    n = 1000  # ~160 KiB of frames into a 16 KiB spool
    with capture_logs() as logs:
        for i in range(n):
            sp.append(rec(i))
    st = sp.stats()
    assert st.bytes <= 16 * KIB
    assert st.over_cap > 0 and st.dropped == st.over_cap and st.corrupt_frames == 0
    assert st.pending_records + st.dropped == n
    left = ids(sp.peek(n))
    # what is left is the newest records, contiguous and in order
    assert left == list(range(n - len(left), n))
    drops = [e for e in logs if e["event"] == "spool over its cap: dropped the oldest segment"]
    assert sum(e["unsent"] for e in drops) == st.over_cap
    assert st.summary() == f"{len(left)} pending, {st.dropped} dropped ({st.dropped} over cap)"
    # the drop survives a restart: dropped records are not resurrected
    sp.close()
    assert ids(make(tmp_path, max_bytes=16 * KIB, segment_bytes=4 * KIB).peek(n)) == left


def test_dropping_a_segment_while_reading_it_moves_the_reader_on(tmp_path):
    sp = make(tmp_path, max_bytes=8 * KIB, segment_bytes=2 * KIB)
    for i in range(10):
        sp.append(rec(i))
    sp.commit(sp.peek(3)[-1])  # reader in the middle of the first segment
    for i in range(10, 200):
        sp.append(rec(i))
    got = ids(sp.peek(1000))
    assert got == sorted(got) and got[-1] == 199
    assert sp.stats().dropped + sp.pending + 3 == 200


def test_segment_larger_than_half_the_cap_is_refused(tmp_path):
    with pytest.raises(ValueError, match="segment_bytes"):
        Spool(tmp_path, max_bytes=8 * KIB, segment_bytes=8 * KIB)


def test_fsync_always_syncs_every_append(tmp_path, monkeypatch):
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    sp = make(tmp_path, fsync="always")
    before = len(calls)
    for i in range(3):
        sp.append(rec(i))
    assert len(calls) - before >= 3


def test_fsync_interval_follows_the_clock_and_urgent_appends_sync_at_once(tmp_path, monkeypatch):
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    clock = SimClock()
    sp = make(tmp_path, fsync="interval", fsync_interval_s=2.0, clock=clock)
    sp.append(rec(0))
    n = len(calls)
    assert not sp.sync_due()
    clock._t += 2.5  # time passes without anyone sleeping
    assert sp.sync_due()
    sp.sync()
    assert len(calls) == n + 1 and not sp.sync_due()
    sp.append(rec(1), sync=True)  # a fault: fsync now, whatever the policy
    assert len(calls) == n + 2


def test_fsync_never_does_not_sync(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append(fd))
    sp = make(tmp_path, fsync="never")
    for i in range(50):
        sp.append(rec(i))
    sp.close()
    assert calls == []
