"""File follower (tail -F) on a simulated clock: appends, partial lines, truncation, rotation, late files."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from myolo.agent.nccl.follow import FileFollower, stream_lines
from myolo.agent.nccl.tracker import NcclTracker
from myolo.agent.nccl.watch import watch_lines
from myolo.common.clock import SimClock
from myolo.events.payloads import NcclReport, NodeFault


async def _collect(follower: FileFollower, out: list[str]) -> None:
    async for line in follower.lines():
        out.append(line)


def _append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)


async def test_follows_appends_partial_lines_and_waits_for_late_file(tmp_path: Path) -> None:
    clock = SimClock()
    path = tmp_path / "nccl.log"
    out: list[str] = []
    follower = FileFollower(path, clock, poll_s=1.0)
    task = asyncio.create_task(_collect(follower, out))
    await clock.advance(3)
    assert out == []  # no file yet: waits, does not fail
    _append(path, "one\ntw")
    await clock.advance(1)
    assert out == ["one"]  # "tw" waits for its newline
    _append(path, "o\nthree\n")
    await clock.advance(1)
    assert out == ["one", "two", "three"]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_truncation_restarts_from_top(tmp_path: Path) -> None:
    clock = SimClock()
    path = tmp_path / "nccl.log"
    path.write_text("a long first line of the old contents\nsecond\n")
    follower = FileFollower(path, clock)
    assert follower.poll() == ["a long first line of the old contents", "second"]
    with open(path, "w") as fh:  # copytruncate
        fh.write("new\n")
    assert follower.poll() == ["new"]
    assert follower.truncations == 1
    follower.close()


async def test_rotation_finishes_old_file_then_reads_new_one(tmp_path: Path) -> None:
    clock = SimClock()
    path = tmp_path / "nccl.log"
    path.write_text("old 1\n")
    follower = FileFollower(path, clock)
    assert follower.poll() == ["old 1"]
    _append(path, "old 2\nold tail without newline")
    os.rename(path, tmp_path / "nccl.log.1")
    assert follower.poll() == ["old 2"]  # renamed away, no new file yet: keeps reading the old one
    path.write_text("new 1\n")
    assert follower.poll() == ["old tail without newline", "new 1"]
    assert follower.rotations == 1
    follower.close()


async def test_from_end_skips_existing_contents(tmp_path: Path) -> None:
    path = tmp_path / "nccl.log"
    path.write_text("history\n")
    follower = FileFollower(path, SimClock(), from_start=False)
    assert follower.poll() == []
    _append(path, "fresh\n")
    assert follower.poll() == ["fresh"]
    follower.close()


async def test_binary_garbage_and_overlong_lines(tmp_path: Path) -> None:
    path = tmp_path / "nccl.log"
    path.write_bytes(b"\xff\xfe\x00bad\n" + b"x" * 300 + b"\nok\n")
    follower = FileFollower(path, SimClock(), max_line=100)
    lines = follower.poll()
    assert lines[0] == "\ufffd\ufffd\x00bad"
    assert [len(x) for x in lines[1:4]] == [100, 100, 100] and lines[-1] == "ok"
    follower.close()


async def test_log_to_published_faults_end_to_end(tmp_path: Path) -> None:
    """A trainer appends to its NCCL log; the watch publishes the report and the fault as they appear."""
    clock = SimClock()
    path = tmp_path / "nccl.41873.log"
    published: list[NcclReport | NodeFault] = []

    async def emit(payload: NcclReport | NodeFault) -> None:
        published.append(payload)

    follower = FileFollower(path, clock, poll_s=0.5)
    task = asyncio.create_task(watch_lines(follower.lines(), NcclTracker("node-1"), emit, clock))
    _append(path, "h:5:5 [0] NCCL INFO comm 0xa rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0\n")
    await clock.advance(1)
    assert published == []
    _append(
        path, "h:5:5 [0] NCCL INFO comm 0xa rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x9 - Init COMPLETE\n"
    )
    await clock.advance(1)
    assert [type(p).__name__ for p in published] == ["NcclReport"]
    _append(path, "h:5:6 [0] misc/socket.cc:50 NCCL WARN Net : Connection closed by remote peer\n")
    await clock.advance(0.5)
    assert [p.kind for p in published if isinstance(p, NodeFault)] == ["nccl_warn"]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_stream_lines_from_a_pipe() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(b"a\nb")
    reader.feed_data(b"c\n\xffd")
    reader.feed_eof()
    assert [line async for line in stream_lines(reader)] == ["a", "bc", "\ufffdd"]
