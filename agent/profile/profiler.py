"""py-spy on one trainer worker, for the ``profile`` command: it samples the worker's stacks for a bounded time
and the agent keeps the folded stacks (``<dir>/<id>.folded``, with ``<id>.json`` saying what they are) for
``GET /v1/profiles/{id}``.

One profile runs at a time on a node (the executor runs one action of a kind at a time); the newest ``keep``
are kept, older ones are removed. py-spy attaches with ptrace: where the kernel refuses (Yama, a container
without CAP_SYS_PTRACE, another user's process), the profile fails with that reason and the fix. A worker that
exits while it is sampled ends the profile early, which the record says.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import msgspec
import structlog

from myolo.common.clock import Clock
from myolo.common.files import atomic_write

log = structlog.get_logger("myolo.agent.profile")
State = Literal["running", "done", "failed"]
STDERR_LIMIT = 8192
PTRACE_FIX = (
    "py-spy needs ptrace rights over the worker: run the agent with CAP_SYS_PTRACE (AmbientCapabilities="
    "CAP_SYS_PTRACE in its systemd unit, or --cap-add SYS_PTRACE for a container), or allow tracing by "
    "kernel.yama.ptrace_scope = 1 (workers let their agent trace them) or 0"
)


class ProfileRecord(msgspec.Struct, kw_only=True):
    """What a profile is and how it went (``GET /v1/profiles/{id}``); written beside the data when it ends."""

    profile_id: str
    job_id: str
    rank: int
    pid: int
    state: State
    started: float  # the agent's clock
    duration_s: float
    rate_hz: int
    native: bool
    seconds: float = 0.0  # how long it sampled
    samples: int = 0
    ended_early: bool = False  # the worker exited before duration_s
    error: str | None = None


class ProfileError(Exception):
    """The profile could not be taken; the message says why and what to do."""


def find_py_spy(configured: str = "") -> str | None:
    """``configured``, else py-spy next to this Python (its wheel installs it there), else on PATH."""
    if configured:
        return configured
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


def explain(stderr: str, pid: int) -> str:
    """py-spy's failure, translated: the kernel's refusal to trace gets the fix."""
    text = " ".join(stderr.split("Stack backtrace:", 1)[0].split())[:600] or "no message"
    lowered = text.lower()
    if "permission denied" in lowered or "operation not permitted" in lowered or "ptrace" in lowered:
        return f"ptrace of pid {pid} denied ({text}); {PTRACE_FIX}"
    return f"py-spy failed on pid {pid}: {text}"


def _alive(pid: int) -> bool:
    """Running (a zombie, exited but not reaped yet by its parent, is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


@dataclass
class Profiler:
    dir: Path
    clock: Clock
    py_spy: str = ""
    keep: int = 10
    max_bytes: int = 64 << 20
    alive: Callable[[int], bool] = _alive

    def __post_init__(self) -> None:
        self.records: dict[str, ProfileRecord] = {}

    def data_path(self, profile_id: str) -> Path:
        return self.dir / f"{profile_id}.folded"

    def record(self, profile_id: str) -> ProfileRecord | None:
        """The profile as the agent knows it: running or ended in this run, or ended in an earlier one."""
        if profile_id in self.records:
            return self.records[profile_id]
        try:
            return msgspec.json.decode((self.dir / f"{profile_id}.json").read_bytes(), type=ProfileRecord)
        except (OSError, msgspec.DecodeError):
            return None

    async def run(
        self, profile_id: str, job_id: str, rank: int, pid: int, duration_s: float, rate_hz: int, native: bool
    ) -> ProfileRecord:
        """Sample ``pid`` for ``duration_s``; the record as it ended. Raises :class:`ProfileError` when it failed."""
        binary = find_py_spy(self.py_spy)
        if binary is None:
            raise ProfileError("py-spy is not installed on this node: `pip install py-spy` in the agent's environment")
        if self.record(profile_id) is not None:
            raise ProfileError(f"a profile {profile_id!r} exists already on this node: give another id")
        self.dir.mkdir(parents=True, exist_ok=True)
        rec = ProfileRecord(
            profile_id=profile_id,
            job_id=job_id,
            rank=rank,
            pid=pid,
            state="running",
            started=self.clock.now(),
            duration_s=duration_s,
            rate_hz=rate_hz,
            native=native,
        )
        self.records[profile_id] = rec
        out = self.data_path(profile_id)
        cmd = [binary, "record", "--pid", str(pid), "--duration", str(max(1, round(duration_s))), "--rate"]
        cmd += [str(rate_hz), "--format", "raw", "--output", str(out), "--nonblocking"]
        if native:
            cmd.append("--native")
        log.info("profiling", profile_id=profile_id, job_id=job_id, rank=rank, pid=pid, duration_s=duration_s)
        start = self.clock.monotonic()
        proc: asyncio.subprocess.Process | None = None
        try:
            proc = await asyncio.create_subprocess_exec(
                *cmd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                env={**os.environ, "RUST_BACKTRACE": "0"},
            )
            _, err = await proc.communicate()
        except OSError as exc:
            rec = self._end(rec, start, f"cannot run {binary}: {exc.strerror or exc}")
        except asyncio.CancelledError:
            if proc is not None and proc.returncode is None:
                proc.kill()
            self._end(rec, start, "stopped: the agent stopped while it ran")
            raise
        else:
            # py-spy stops before its duration only when the process it samples is gone (or going: a killed
            # process may not be a zombie yet the moment py-spy notices), so an early end with stacks written
            # is the worker's end, not py-spy's failure
            early = self.clock.monotonic() - start < duration_s - 1.0
            if proc.returncode != 0 and not (out.exists() and (early or not self.alive(pid))):
                rec = self._end(rec, start, explain(err[-STDERR_LIMIT:].decode(errors="replace"), pid))
            else:
                rec = self._end(rec, start, None, exited=early)
        if rec.error is not None:
            raise ProfileError(rec.error)
        return rec

    def _end(self, rec: ProfileRecord, start: float, error: str | None, *, exited: bool = False) -> ProfileRecord:
        rec.seconds = round(self.clock.monotonic() - start, 3)
        out = self.data_path(rec.profile_id)
        if error is None:
            try:
                size = out.stat().st_size
                if size > self.max_bytes:
                    error = f"py-spy wrote {size} bytes, over the {self.max_bytes}-byte bound; profile for less time"
                else:
                    rec.samples = _count_samples(out.read_text(errors="replace"))
            except OSError as exc:
                error = f"py-spy wrote no profile ({exc.strerror or exc})"
        rec.ended_early = exited
        rec.state, rec.error = ("failed", error) if error else ("done", None)
        if error:
            out.unlink(missing_ok=True)
            log.warning("profile failed", profile_id=rec.profile_id, error=error)
        else:
            log.info("profile taken", profile_id=rec.profile_id, samples=rec.samples, ended_early=rec.ended_early)
        atomic_write(self.dir / f"{rec.profile_id}.json", msgspec.json.encode(rec), durable=False)
        self._prune()
        return rec

    def _prune(self) -> None:
        ended = sorted(self.dir.glob("*.json"), key=lambda p: p.stat().st_mtime)
        for old in ended[: max(0, len(ended) - self.keep)]:
            old.unlink(missing_ok=True)
            old.with_suffix(".folded").unlink(missing_ok=True)
            self.records.pop(old.stem, None)


def _count_samples(folded: str) -> int:
    total = 0
    for line in folded.splitlines():
        _, _, count = line.rpartition(" ")
        if count.isdigit():
            total += int(count)
    return total
