"""Warm standby workers: processes that have already imported torch and the trainer and wait for a job.

Why: every job generation starts new worker processes, and most of a worker's start-up is its interpreter
importing torch and the trainer. A standby pays that ahead of time, so a new generation's worker starts at
its rendezvous.

A standby is started like a worker (its own session, the trainer's interpreter, the workers' directory, the
workers' environment less the per-worker variables, see ``launch.standby_env``) as ``-m myolo.kernels.cli.warm``,
its stderr appended to ``<workers_dir>/warm.log``; it says ``ready`` on its stdout once its imports are done.
A start takes a ready one per worker slot (one that died meanwhile is never used) and writes it the worker's
plan (``WarmHandoff``) on stdin; from then on it is that worker, watched, signalled and reaped as a cold one.
It holds no GPU before that (CUDA is untouched), so it is nobody's GPU user.

A standby is retired by closing its stdin (it leaves quietly, and so it does when the agent dies) and
SIGTERM, then SIGKILL after ``term_grace_s``, to its group. The pool is level-triggered: ``reconcile``
brings it to a target (the supervisor's: 0 while draining or closing) and drops the dead; standbys started
with an older configuration are retired. A standby that dies before it is ready, or is not ready within
``ready_timeout_s``, is a failure: the next is started after a back-off, so a trainer interpreter that
cannot import torch costs a log line now and then, not a process a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec
import structlog

from myolo.agent.trainer import launch, leftovers
from myolo.agent.trainer.logtail import tail_lines
from myolo.agent.trainer.signals import running_child, signal_group, wait_all
from myolo.common.clock import Clock
from myolo.events.payloads.warm_handoff import MAX_HANDOFF_BYTES, READY_LINE, WarmHandoff

log = structlog.get_logger("myolo.agent.trainer")
KILL_WAIT_S = 5.0
LOG_NAME = "warm.log"
MAX_LOG_BYTES = 1 << 20  # then warm.log becomes warm.log.1
BACKOFF_S = (5.0, 300.0)  # after the first failure, doubling up to the second


@dataclass
class Standby:
    proc: asyncio.subprocess.Process
    epoch: int  # the pool configuration it was started with
    started: float  # the agent's monotonic clock
    ready_fd: int  # our end of its stdout, read until its ready line; -1 once closed
    ready: bool = False
    partial: bytes = b""  # the start of a line not yet complete

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.returncode is None and running_child(self.pid)

    def stop_reading(self) -> None:
        if self.ready_fd >= 0:
            asyncio.get_running_loop().remove_reader(self.ready_fd)
            os.close(self.ready_fd)
            self.ready_fd = -1

    def let_go(self) -> None:
        """Close our ends of its pipes (its stdin: it leaves at end of file)."""
        self.stop_reading()
        if self.proc.stdin is not None:
            self.proc.stdin.close()


@dataclass
class WarmStats:
    started: int = 0
    handed: int = 0  # became workers
    retired: int = 0
    failed: int = 0  # died before ready, or could not be started


class WarmPool:
    def __init__(
        self,
        *,
        clock: Clock,
        python: Sequence[str],
        workers_dir: Path,
        base_env: Mapping[str, str],
        nice: int,
        term_grace_s: float,
        ready_timeout_s: float,
    ) -> None:
        self.clock = clock
        self.standbys: list[Standby] = []
        self.stats = WarmStats()
        self.closed = False
        self._epoch = 0
        self._base_env = base_env
        self.configure(
            python=python,
            workers_dir=workers_dir,
            nice=nice,
            term_grace_s=term_grace_s,
            ready_timeout_s=ready_timeout_s,
        )
        self._lock = asyncio.Lock()

    def configure(
        self, *, python: Sequence[str], workers_dir: Path, nice: int, term_grace_s: float, ready_timeout_s: float
    ) -> None:
        """A new configuration: the standbys started under the old one are retired at the next reconcile."""
        self._python, self._workers_dir, self._nice = tuple(python), workers_dir, nice
        self._term_grace_s, self._ready_timeout_s = term_grace_s, ready_timeout_s
        self._epoch += 1
        self._failures, self._retry_at = 0, float("-inf")  # failures in a row; when to try again

    def counts(self) -> dict[str, int]:
        """Standbys ready to take a worker, and the others (importing, or of an older configuration)."""
        ready = sum(1 for s in self.standbys if s.ready and s.epoch == self._epoch)
        return {"ready": ready, "other": len(self.standbys) - ready}

    # ------------------------------------------------------------------ use
    def take(self) -> Standby | None:
        """A ready standby of the current configuration, still running, now the caller's; None when there is
        none."""
        for s in list(self.standbys):
            if s.ready and s.epoch == self._epoch and s.alive():
                self.standbys.remove(s)
                return s
        return None

    async def hand(self, standby: Standby, plan: launch.WorkerPlan) -> bool:
        """Make ``standby`` the worker of ``plan``. False (and the standby killed) when it cannot take it: the
        caller starts that worker cold."""
        msg = WarmHandoff(env=dict(plan.env), argv=list(plan.args), cwd=str(plan.cwd), log=str(plan.log_path))
        line = msgspec.json.encode(msg) + b"\n"
        stdin = standby.proc.stdin
        try:
            if len(line) > MAX_HANDOFF_BYTES:
                raise ValueError(f"the handoff is {len(line)} bytes, over {MAX_HANDOFF_BYTES}")
            assert stdin is not None
            stdin.write(line)
            await stdin.drain()
            stdin.close()
        except (OSError, ValueError) as exc:  # ConnectionResetError / BrokenPipeError: it died meanwhile
            log.warning("warm standby could not take a worker", pid=standby.pid, rank=plan.rank, error=str(exc))
            await self._retire([standby])
            return False
        self.stats.handed += 1
        return True

    # ------------------------------------------------------------------ upkeep
    async def reconcile(self, target: int, *, spawn: bool = True) -> None:
        """Drop the dead, retire the stale and the surplus, and (when ``spawn``) start standbys up to
        ``target``."""
        async with self._lock:
            self._drop_dead()
            doomed = [s for s in self.standbys if s.epoch != self._epoch or self._too_slow(s)]
            current = [s for s in self.standbys if s.epoch == self._epoch]
            surplus = len(current) - target
            if surplus > 0:  # the ones still importing go first
                doomed += sorted(current, key=lambda s: s.ready)[:surplus]
            for s in doomed:
                self.standbys.remove(s)
            if doomed:
                await self._retire(doomed)
            while (
                spawn and not self.closed and len(self.standbys) < target and self.clock.monotonic() >= self._retry_at
            ):
                standby = await self._start_one()
                if standby is None:
                    break
                if self.closed:
                    await self._retire([standby])
                    break
                self.standbys.append(standby)

    async def close(self) -> None:
        """Retire every standby; none is started afterwards."""
        self.closed = True
        async with self._lock:
            doomed, self.standbys = self.standbys, []
            await self._retire(doomed)

    def _drop_dead(self) -> None:
        for s in list(self.standbys):
            if s.alive():
                continue
            self.standbys.remove(s)
            s.let_go()
            if s.ready:
                log.warning("warm standby exited while waiting", pid=s.pid, code=s.proc.returncode)
            else:
                self._failed(f"it exited with code {s.proc.returncode} before it was ready", pid=s.pid)

    def _too_slow(self, s: Standby) -> bool:
        if s.ready or self.clock.monotonic() - s.started < self._ready_timeout_s:
            return False
        self._failed(f"it was not ready within {self._ready_timeout_s:.0f} s", pid=s.pid)
        return True

    def _failed(self, why: str, **fields: object) -> None:
        self.stats.failed += 1
        self._failures += 1
        delay = min(BACKOFF_S[1], BACKOFF_S[0] * 2 ** (self._failures - 1))
        self._retry_at = self.clock.monotonic() + delay
        log.warning(
            "warm standby failed; workers start cold meanwhile",
            why=why,
            retry_in_s=delay,
            log=str(self._log_path()),
            log_tail=tail_lines(self._log_path(), 5),
            **fields,
        )

    def _log_path(self) -> Path:
        return self._workers_dir / LOG_NAME

    async def _start_one(self) -> Standby | None:
        path = self._log_path()
        try:
            self._workers_dir.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_size > MAX_LOG_BYTES:
                    os.replace(path, path.with_name(LOG_NAME + ".1"))
            # stdout is a plain pipe, not the process's: asyncio's wait() would also wait for its end of
            # file, which a descendant that inherited it could hold back after the worker exited
            ready_r, ready_w = os.pipe()
            try:
                with path.open("ab") as err:
                    proc = await asyncio.create_subprocess_exec(
                        *self._python,
                        "-m",
                        launch.STANDBY_MODULE,
                        "--nice",
                        str(self._nice),
                        cwd=self._workers_dir,
                        env=launch.standby_env(self._base_env),
                        stdin=asyncio.subprocess.PIPE,
                        stdout=ready_w,
                        stderr=err,
                        start_new_session=True,
                    )
            except OSError:
                os.close(ready_r)
                raise
            finally:
                os.close(ready_w)
        except OSError as exc:
            self._failed(f"it could not be started: {exc}")
            return None
        self.stats.started += 1
        leftovers.record(self._workers_dir, proc.pid, "standby")
        standby = Standby(proc=proc, epoch=self._epoch, started=self.clock.monotonic(), ready_fd=ready_r)
        os.set_blocking(ready_r, False)
        asyncio.get_running_loop().add_reader(ready_r, self._read_ready, standby)
        log.debug("warm standby started", pid=proc.pid)
        return standby

    def _read_ready(self, standby: Standby) -> None:
        """Its stdout is readable: look for the ready line (what an import printed before it is passed
        over), then stop reading; at end of file (it died) stop too."""
        try:
            chunk = os.read(standby.ready_fd, 4096)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            standby.stop_reading()
            return
        *lines, standby.partial = (standby.partial + chunk).split(b"\n")
        standby.partial = standby.partial[-len(READY_LINE) :]  # bounded: only a ready line matters
        if READY_LINE.rstrip(b"\n") in lines:
            standby.ready = True
            standby.stop_reading()
            self._failures = 0
            log.info("warm standby ready", pid=standby.pid)

    async def _retire(self, standbys: list[Standby]) -> None:
        if not standbys:
            return
        for s in standbys:
            s.let_go()
            signal_group(s.pid, signal.SIGTERM)
        waits = [asyncio.ensure_future(s.proc.wait()) for s in standbys]
        if not await wait_all(waits, self.clock, self._term_grace_s):
            for s in standbys:
                if s.proc.returncode is None:
                    signal_group(s.pid, signal.SIGKILL)
            await wait_all(waits, self.clock, KILL_WAIT_S)
        for w in waits:
            w.cancel()
        self.stats.retired += len(standbys)
