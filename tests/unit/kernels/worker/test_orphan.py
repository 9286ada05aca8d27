"""A worker started by an agent dies with it: PR_SET_PDEATHSIG, and a check for a parent already gone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from myolo.kernels.worker.orphan import AGENT_PID_VAR, EXIT_ORPHANED, agent_pid

ROOT = Path(__file__).resolve().parents[4]
WORKER = (
    "import sys, time; from myolo.kernels.worker.orphan import die_with_agent; die_with_agent(); "
    "print('armed', flush=True); time.sleep(120)"
)
# the "agent": starts the worker with its pid in the environment, says the worker's pid, then waits
AGENT = (
    "import os, subprocess, sys, time; "
    f"env = {{**os.environ, {AGENT_PID_VAR!r}: str(os.getpid())}}; "
    f"p = subprocess.Popen([sys.executable, '-c', {WORKER!r}], env=env, stdout=subprocess.PIPE, "
    "start_new_session=True); "
    "assert p.stdout.readline() == b'armed\\n'; print(p.pid, flush=True); time.sleep(120)"
)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_worker_dies_when_its_agent_is_killed() -> None:
    agent = subprocess.Popen([sys.executable, "-c", AGENT], env=_env(), stdout=subprocess.PIPE)
    try:
        worker = int(agent.stdout.readline())
        assert not _gone(worker)
        agent.kill()
        agent.wait()
        deadline = time.monotonic() + 30  # a bound on the kernel's delivery, not a wait for a timer
        while not _gone(worker) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _gone(worker), "the worker outlived its agent"
    finally:
        agent.kill()
        agent.wait()


def test_a_worker_whose_agent_is_already_gone_leaves_at_once() -> None:
    env = {**_env(), AGENT_PID_VAR: str(os.getpid())}  # not its parent: its parent is the shell below
    done = subprocess.run(
        ["sh", "-c", f"{sys.executable} -c {WORKER!r}; echo $?"], env=env, capture_output=True, timeout=60
    )
    assert done.stdout.split()[-1] == str(EXIT_ORPHANED).encode()
    assert b"its agent" in done.stderr and b"is gone" in done.stderr


def test_without_an_agent_nothing_is_asked() -> None:
    assert agent_pid({}) is None and agent_pid({AGENT_PID_VAR: "x"}) is None and agent_pid({AGENT_PID_VAR: "1"}) is None
    assert agent_pid({AGENT_PID_VAR: " 4242 "}) == 4242


@pytest.mark.parametrize("command", ["myolo.kernels.cli.warm", "myolo.kernels.cli.worker --help"])
def test_the_worker_and_the_standby_ask_before_anything_else(command: str) -> None:
    """Before the standby's imports, before the worker reads its arguments."""
    env = {**_env(), AGENT_PID_VAR: str(os.getpid())}
    done = subprocess.run(
        ["sh", "-c", f"{sys.executable} -m {command}; echo $?"], env=env, capture_output=True, timeout=120
    )
    assert done.stdout.split()[-1] == str(EXIT_ORPHANED).encode(), done.stderr[-2000:]
