"""Writing: a short write is completed, a write the disk refuses is undone and counted, and neither leaves a
frame behind that a reader would trip on (the operating system's write is the fault injected here)."""

from __future__ import annotations

import errno
import os

import pytest

from tests.support.agent.spoolkit import drain, make, rec, segments

N = 300


def test_short_writes_are_completed(tmp_path, monkeypatch):
    real = os.write
    calls = []

    def short(fd, data):
        calls.append(len(data))
        return real(fd, bytes(data[:7]))  # the kernel may write less than asked: here, always 7 bytes

    sp = make(tmp_path)
    monkeypatch.setattr(os, "write", short)
    for i in range(N):
        sp.append(rec(i))
    monkeypatch.setattr(os, "write", real)
    assert len(calls) > 20 * N  # every frame took many writes
    assert sp.failed_writes == 0
    assert drain(sp) == list(range(N))
    sp.close()
    again = make(tmp_path)
    assert (again.pending, again.dropped, again.torn_tails) == (0, 0, 0)


class DiskFull:
    """os.write that writes part of the frame and then fails, for the ``at``-th frame written."""

    def __init__(self, at: int) -> None:
        self.real = os.write
        self.at = at
        self.frames = 0
        self.mid_frame = False

    def __call__(self, fd, data):
        if self.mid_frame:
            self.mid_frame = False
            raise OSError(errno.ENOSPC, "No space left on device")
        self.frames += 1
        if self.frames == self.at:
            self.mid_frame = True
            return self.real(fd, bytes(data[: len(data) // 2]))
        return self.real(fd, data)


def test_a_refused_write_is_undone_counted_and_the_number_reused(tmp_path, monkeypatch):
    sp = make(tmp_path)
    full = DiskFull(at=151)
    monkeypatch.setattr(os, "write", full)
    kept = []
    for i in range(N):
        try:
            sp.append(rec(i))
            kept.append(i)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC and i == 150
            # the half frame is cut off again: on disk there are only whole frames
            assert sum(p.stat().st_size for p in segments(tmp_path / "spool")) == sp.stats().bytes
    monkeypatch.setattr(os, "write", full.real)
    st = sp.stats()
    assert (st.failed_writes, st.dropped, st.pending_records, st.last_seq) == (1, 1, N - 1, N - 1)
    assert drain(sp) == kept == [i for i in range(N) if i != 150]
    sp.close()
    again = make(tmp_path)
    assert (again.corrupt_frames, again.torn_tails, again.pending) == (0, 0, 0)


def test_a_refused_write_that_cannot_be_cut_back_moves_to_a_new_segment(tmp_path, monkeypatch):
    sp = make(tmp_path)
    for i in range(10):
        sp.append(rec(i))
    full = DiskFull(at=1)
    monkeypatch.setattr(os, "write", full)

    def no_truncate(fd, size):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "ftruncate", no_truncate)
    with pytest.raises(OSError):
        sp.append(rec(10))
    monkeypatch.undo()
    before = len(segments(tmp_path / "spool"))
    for i in range(11, 20):
        sp.append(rec(i))
    assert len(segments(tmp_path / "spool")) == before + 1
    expected = [i for i in range(20) if i != 10]
    assert sp.failed_writes == 1 and sp.pending == 19
    sp.close()
    # on a restart the half frame at the end of the older segment is stepped over: nothing more is lost
    again = make(tmp_path)
    assert (again.corrupt_frames, again.dropped, again.pending) == (0, 0, 19)
    assert drain(again) == expected
