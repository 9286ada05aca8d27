"""Signals to a worker's process group, and waiting for processes on the agent's clock."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from myolo.common.clock import Clock


def running_child(pid: int) -> bool:
    """True while ``pid`` is our child and has not exited. Checked before signalling its group: once a child
    is reaped its pid may be reused, and a group signal would hit a stranger's session."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:
        return False


def signal_group(pid: int, sig: int) -> bool:
    """Send ``sig`` to the process group led by ``pid`` (each worker leads its own session), our running
    child; False when it is gone. A stopped (SIGSTOP) group also gets SIGCONT after SIGTERM, so it can act."""
    if not running_child(pid):
        return False
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    if sig == signal.SIGTERM:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGCONT)
    return True


def signal_name(returncode: int) -> str | None:
    """``SIGKILL`` for a return code of -9; None for a normal exit."""
    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first); None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read(4096)
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()


def process_stopped(pid: int) -> bool:
    """True when the process is stopped (state T: SIGSTOP, or a debugger): a hang that is certainly its own."""
    fields = stat_fields(pid)
    return bool(fields) and fields[0] in (b"T", b"t")


async def wait_all(waits: list[asyncio.Future], clock: Clock, timeout_s: float) -> bool:
    """Wait until every future is done or ``timeout_s`` passed on ``clock``; True when all are done."""
    pending = {w for w in waits if not w.done()}
    if not pending:
        return True
    timer = asyncio.ensure_future(clock.sleep(timeout_s))
    try:
        while pending:
            done, _ = await asyncio.wait(pending | {timer}, return_when=asyncio.FIRST_COMPLETED)
            pending -= done
            if timer in done:
                return not pending
        return True
    finally:
        timer.cancel()
