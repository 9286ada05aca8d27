"""Start, watch and stop detached local processes by pid (the broker now, coordinators/agents later).

Processes are tracked by pid plus a marker string that must appear in /proc/<pid>/cmdline, so a pid
recycled by the kernel for an unrelated program is never mistaken for ours, and never signalled.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    # PR_SET_PDEATHSIG fires when the *thread* that forked exits: start tied brokers from a long-lived thread.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def launch(cmd: Sequence[str], *, cwd: Path, output: Path, tied_to_parent: bool) -> subprocess.Popen:
    """Start `cmd` in its own session with stdout+stderr appended to `output`.

    Its own session keeps Ctrl-C in the terminal from reaching it. `tied_to_parent` (Linux) makes the
    kernel send SIGTERM when the launching process dies, so a killed test run leaves no orphan broker;
    `myoloctl local up` passes False because the broker must outlive the command.
    """
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "ab") as sink:
        return subprocess.Popen(
            list(cmd),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if tied_to_parent and sys.platform == "linux" else None,
        )


_EXITED: dict[int, int] = {}  # wait statuses of our children reaped by alive(), for exit_status()


def _reap(pid: int) -> bool:
    """Collect `pid`'s wait status if it is our child and has ended; True while it is our child, not reaped."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    if done == pid:
        _EXITED[pid] = status
        return False
    return True


def exit_status(pid: int) -> str | None:
    """How our child ``pid`` ended ("exit code 1", "killed by SIGKILL"); None when it was not our child or has
    not ended."""
    _reap(pid)  # it may have ended after alive() last reaped
    status = _EXITED.get(pid)
    if status is None:
        return None
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            return f"killed by {signal.Signals(sig).name}"
        except ValueError:
            return f"killed by signal {sig}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


def alive(pid: int, marker: str | None = None) -> bool:
    """True if `pid` runs (not a zombie) and, when /proc exists, its command line contains `marker`."""
    if pid <= 0:
        return False
    ours_running = _reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else; the marker check below decides
    proc = Path(f"/proc/{pid}")
    if not proc.exists():
        return sys.platform != "linux"
    try:
        if proc.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
        cmdline = proc.joinpath("cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, IndexError):
        return False
    if ours_running and not cmdline:
        return True  # our child is exiting (memory released, not yet a zombie): alive until it can be reaped
    return marker is None or marker in cmdline


def terminate(pid: int, marker: str | None, timeout: float = 30.0) -> str:
    """SIGTERM, wait up to `timeout` s, then SIGKILL. Returns "stopped", "killed" or "not running"."""
    if not alive(pid, marker):
        return "not running"
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if _wait_gone(pid, marker, timeout):
        return "stopped"
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    _wait_gone(pid, marker, 10.0)
    return "killed"


def _wait_gone(pid: int, marker: str | None, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid, marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def tail(path: Path, lines: int = 30) -> str:
    """The last `lines` lines of a text file, or "" if it does not exist."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
