"""Tracking detached local processes: alive by pid and marker, and how one that died ended."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from myolo.coordinator.localstack.broker import process


def _ended(pid: int, marker: str) -> None:
    deadline = time.monotonic() + 30  # a bound on the process's own end, not a wait for a timer
    while process.alive(pid, marker):
        assert time.monotonic() < deadline, "it did not end"
        time.sleep(0.02)


def test_a_child_that_exits_says_its_code(tmp_path: Path) -> None:
    proc = process.launch(
        ["sh", "-c", "exit 3", "marker-a"], cwd=tmp_path, output=tmp_path / "a.log", tied_to_parent=False
    )
    _ended(proc.pid, "marker-a")
    assert process.exit_status(proc.pid) == "exit code 3"


def test_a_child_killed_says_the_signal(tmp_path: Path) -> None:
    for _ in range(10):  # a child seen between its exit and its zombie state is still alive, not lost
        proc = process.launch(["sleep", "60"], cwd=tmp_path, output=tmp_path / "b.log", tied_to_parent=False)
        assert process.alive(proc.pid, "sleep")
        os.kill(proc.pid, signal.SIGKILL)
        _ended(proc.pid, "sleep")
        assert process.exit_status(proc.pid) == "killed by SIGKILL"


def test_a_process_not_ours_has_no_status() -> None:
    assert process.exit_status(1) is None and not process.alive(1, "no such marker anywhere")
