"""Records of the processes the supervisor starts, and the next run's sweep of those still running."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from myolo.agent.trainer import leftovers


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def test_a_recorded_process_still_running_is_killed_with_its_group(tmp_path: Path, sleeper) -> None:
    leftovers.record(tmp_path, sleeper.pid, "standby")
    stopped = leftovers.sweep(tmp_path)
    assert stopped == [leftovers.Stopped(pid=sleeper.pid, what="standby")]
    assert sleeper.wait(timeout=30) == -signal.SIGKILL
    assert not list((tmp_path / leftovers.DIR_NAME).iterdir())


def test_a_reused_pid_is_left_alone(tmp_path: Path, sleeper) -> None:
    """Same pid, another start time: a stranger that got the pid of a process long gone."""
    ticks = leftovers.start_ticks(sleeper.pid)
    assert ticks is not None
    directory = tmp_path / leftovers.DIR_NAME
    directory.mkdir()
    rec = leftovers.ProcRecord(pid=sleeper.pid, start_ticks=ticks - 1, what="worker")
    (directory / f"{sleeper.pid}.json").write_bytes(msgspec.json.encode(rec))
    assert leftovers.sweep(tmp_path) == []
    assert sleeper.poll() is None
    assert not list(directory.iterdir())  # forgotten all the same


def test_hostile_and_stale_records_are_dropped(tmp_path: Path, sleeper) -> None:
    directory = tmp_path / leftovers.DIR_NAME
    directory.mkdir()
    (directory / "1.json").write_bytes(b'{"pid": 1, "start_ticks": "x"}')
    (directory / "2.json").write_bytes(b"{" * (leftovers.MAX_RECORD_BYTES + 10))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    leftovers.record(tmp_path, gone.pid, "worker")
    gone.wait()
    leftovers.record(tmp_path, sleeper.pid, "worker")  # a new record prunes the dead and the unreadable
    assert sorted(p.name for p in directory.iterdir()) == [f"{sleeper.pid}.json"]
    assert leftovers.sweep(tmp_path) == [leftovers.Stopped(pid=sleeper.pid, what="worker")]


def test_a_process_already_gone_is_not_recorded(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    leftovers.record(tmp_path, gone.pid, "worker")
    assert not (tmp_path / leftovers.DIR_NAME).exists() or not list((tmp_path / leftovers.DIR_NAME).iterdir())
    assert leftovers.start_ticks(gone.pid) is None
