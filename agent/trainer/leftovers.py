"""Processes a previous run of the agent left behind: recorded at start, stopped by the next run.

Why: workers and warm standbys run in sessions of their own, so an agent killed with SIGKILL (or by the OOM
killer) leaves them running, and nobody can stop, watch or reap them any more; the coordinator restarts
their job on a new generation anyway. They die with the agent by themselves (``myolo.kernels.worker.orphan``),
but not when the agent died before they asked the kernel to, or on a kernel without that request. So each
process the supervisor starts is recorded in ``<workers_dir>/.procs/<pid>.json`` (pid, its start time in
``/proc``, what it is), and the next agent run, before it starts anything, sends SIGKILL to the process group
of every recorded process that still runs with the same start time (a reused pid has another), and forgets
them all. A record is dropped when its process is gone, at the next record or sweep.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import msgspec
import structlog

from myolo.agent.trainer.signals import stat_fields

log = structlog.get_logger("myolo.agent.trainer")
DIR_NAME = ".procs"
MAX_RECORD_BYTES = 4096


class ProcRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    pid: int
    start_ticks: int  # field 22 of /proc/<pid>/stat: when it started, in clock ticks since boot
    what: str  # "worker" or "standby", for the log


@dataclass(frozen=True)
class Stopped:
    pid: int
    what: str


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot); None when it is gone or a zombie."""
    fields = stat_fields(pid)
    if fields is None or len(fields) < 20 or fields[0] == b"Z":
        return None
    try:
        return int(fields[19])
    except ValueError:
        return None


def record(workers_dir: Path, pid: int, what: str) -> None:
    """Note a process just started (and drop the records of those gone). Never raises: a record that cannot
    be written costs only the next run's sweep of this one."""
    ticks = start_ticks(pid)
    if ticks is None:
        return
    directory = workers_dir / DIR_NAME
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for stale in _records(directory):
            if stale[1] is None or start_ticks(stale[1].pid) != stale[1].start_ticks:
                stale[0].unlink(missing_ok=True)
        path = directory / f"{pid}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(msgspec.json.encode(ProcRecord(pid=pid, start_ticks=ticks, what=what)))
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("cannot record a worker process", pid=pid, dir=str(directory), error=str(exc))


def sweep(workers_dir: Path) -> list[Stopped]:
    """SIGKILL the process group of every recorded process still running as recorded; forget all records."""
    directory = workers_dir / DIR_NAME
    stopped: list[Stopped] = []
    for path, rec in _records(directory):
        if rec is not None and start_ticks(rec.pid) == rec.start_ticks and rec.pid != os.getpid():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(rec.pid, signal.SIGKILL)  # a worker leads its own session
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(rec.pid, signal.SIGKILL)  # in case it did not
            stopped.append(Stopped(pid=rec.pid, what=rec.what))
            log.warning("stopped a process a previous agent run left", pid=rec.pid, what=rec.what)
        with contextlib.suppress(OSError):
            path.unlink()
    return stopped


def _records(directory: Path) -> list[tuple[Path, ProcRecord | None]]:
    """Each record file with its record, None when it cannot be read or is not one (bounded read)."""
    try:
        paths = sorted(directory.glob("*.json"))
    except OSError:
        return []
    out: list[tuple[Path, ProcRecord | None]] = []
    for path in paths:
        try:
            with path.open("rb") as f:
                raw = f.read(MAX_RECORD_BYTES + 1)
            rec = msgspec.json.decode(raw, type=ProcRecord) if len(raw) <= MAX_RECORD_BYTES else None
        except (OSError, msgspec.DecodeError):
            rec = None
        if rec is None:
            log.warning("dropping an unreadable process record", path=str(path))
        out.append((path, rec))
    return out
