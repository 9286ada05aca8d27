"""The node's training supervisor: start a job generation's workers, watch them, stop them.

What it watches, and what it says on Kafka (through ``publish``, the agent's spool):

- progress records from the workers become ``training.progress`` events (``ProgressThrottle``);
- a worker that exits non-zero or by a signal is a ``worker_exit`` fault at once (with its log's last lines),
  and the node's other workers of the job are stopped;
- a worker silent for longer than the learned bound (``HangWatch``) is a ``worker_hang`` fault, and the
  node's workers of the job are stopped;
- when every worker exits 0 on its own, the job generation's ``training.completed`` event.

A stop (``stop_workers``, ``drain``, the agent's own SIGTERM) asks the job to checkpoint and stop after the
current step (only the node holding global rank 0 can ask: it is the rank that hears the agent), waits up
to ``stop_timeout_s``, then SIGTERMs each worker's process group, then SIGKILLs it after ``term_grace_s``.
A worker still in its start-up (no word from it since it was started: importing, meeting its peers, loading
the checkpoint) is not waited for: it has trained nothing to save, and the stop reaches the ranks at a step,
which it may never take once its peers have stopped. Workers do not outlive their agent.

A worker slot is handed to a warm standby (``myolo.agent.trainer.warm``: its imports already done) when one is
ready, else started cold. Jobs with ``compile: true`` always start cold: the worker must give each rank its
own inductor cache through the environment before torch is imported (``myolo.kernels.cli.worker.
isolate_compile_cache``), and a standby has imported it already; such workers spend their start-up
compiling anyway, so the import saved would matter little.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec
import structlog

from myolo.agent.commands.args import ArgsError
from myolo.agent.tasks import TaskSet
from myolo.agent.trainer import launch, leftovers
from myolo.agent.trainer.config import TrainerConfig
from myolo.agent.trainer.export import manifest_path, read_export
from myolo.agent.trainer.hang import Hang, HangWatch
from myolo.agent.trainer.job import LocalJob, Worker
from myolo.agent.trainer.link import BadMessage, WorkerLink, decode, send_control
from myolo.agent.trainer.logtail import tail_lines
from myolo.agent.trainer.signals import process_stopped, signal_group, signal_name, wait_all
from myolo.agent.trainer.throttle import ProgressThrottle
from myolo.agent.trainer.warm import WarmPool
from myolo.common.clock import Clock
from myolo.events.limits import Throttle
from myolo.events.payloads import (
    ControlMessage,
    ModelExport,
    StartWorkersArgs,
    TrainingCompleted,
    TrainingFault,
    TrainingProgress,
    WorkerHeartbeat,
    WorkerInfo,
)
from myolo.events.payloads.commands import StartWorkersResult, StopWorkersResult

log = structlog.get_logger("myolo.agent.trainer")
Publish = Callable[..., object]  # Publisher.publish(payload, urgent=...)
GpuUse = Callable[[dict[int, list[int]]], None]  # GPU index -> pids of the workers on it
TICK_S = 0.25
FaultKind = Literal["worker_exit", "worker_hang"]
KILL_WAIT_S = 5.0
WARM_CHECK_S = 1.0  # how often the warm pool is brought to its target


@dataclass
class SupervisorStats:
    started: int = 0
    progress_in: int = 0
    progress_out: int = 0
    heartbeats: int = 0
    foreign: int = 0  # messages of a job or rank not running here
    bad: int = 0  # frames that are not a progress record or a heartbeat
    faults: int = 0
    completed: int = 0
    leftovers_stopped: int = 0  # processes a previous agent run left, stopped at start


class Supervisor:
    def __init__(
        self,
        cfg: TrainerConfig,
        *,
        node_id: str,
        clock: Clock,
        publish: Publish,
        workers_dir: Path,
        gpu_count: Callable[[], int],
        real_gpus: bool,
        python: Sequence[str],
        on_gpu_use: GpuUse | None = None,
        base_env: Mapping[str, str] | None = None,
        socket_dir: Path | None = None,
        accepting: Callable[[], bool] = lambda: True,
    ) -> None:
        self.cfg = cfg
        self.node_id = node_id
        self.clock = clock
        self.workers_dir = workers_dir
        self.socket_dir = socket_dir  # for the ZeroMQ sockets (the agent's runtime directory); None: loopback TCP
        self.python = tuple(python)
        self.real_gpus = real_gpus
        self.stats = SupervisorStats()
        self.jobs: dict[str, LocalJob] = {}
        self._publish = publish
        self._gpu_count = gpu_count
        self._on_gpu_use = on_gpu_use
        self._base_env = dict(os.environ if base_env is None else base_env)
        self._throttle = ProgressThrottle(cfg.progress_interval_s)
        self._warn = Throttle(clock)
        self._tasks = TaskSet(log, "supervisor task")
        self.link: WorkerLink | None = None
        self._has_jobs = asyncio.Event()
        self._accepting = accepting  # False while the node drains: no standby is kept then
        self.warm = WarmPool(
            clock=clock,
            python=self.python,
            workers_dir=workers_dir,
            base_env=self._base_env,
            nice=cfg.warm_nice,
            term_grace_s=cfg.term_grace_s,
            ready_timeout_s=cfg.startup_timeout_s,
        )

    # ------------------------------------------------------------------ lifecycle
    def open(self) -> None:
        """Stop what a previous run of the agent left running, and bind the workers' progress socket (before
        any command can start a worker)."""
        self.workers_dir.mkdir(parents=True, exist_ok=True)
        self.stats.leftovers_stopped += len(leftovers.sweep(self.workers_dir))
        self.link = WorkerLink(self.socket_dir)

    async def run(self) -> None:
        """Receive the workers' messages and watch for hangs until cancelled."""
        assert self.link is not None, "open() first"
        self.link.attach(self.on_frames)
        warm = asyncio.create_task(self._warm_loop(), name="warm-pool")
        try:
            await self._tick_loop()
        finally:
            warm.cancel()
            if self.link is not None:
                self.link.detach()

    async def close(self) -> None:
        """Retire the warm standbys, stop every local job the way a stop command does (checkpoint first), then
        close the sockets."""
        await self.warm.close()
        await self.stop_all("the agent is stopping", checkpoint=True)
        await self._tasks.cancel()
        if self.link is not None:
            self.link.close()
            self.link = None

    def reconfigure(self, cfg: TrainerConfig, python: Sequence[str]) -> None:
        """A reloaded ``[trainer]`` (SIGHUP): timeouts and the hang rule apply to running jobs too, the
        interpreter and the workers' directory to the next start. Any change retires the warm standbys (they
        were started under the old settings); new ones follow."""
        changed = cfg != self.cfg or tuple(python) != self.python
        self.cfg, self.python = cfg, tuple(python)
        self.workers_dir = Path(cfg.workers_dir) if cfg.workers_dir else self.workers_dir
        if changed:
            self.warm.configure(
                python=python,
                workers_dir=self.workers_dir,
                nice=cfg.warm_nice,
                term_grace_s=cfg.term_grace_s,
                ready_timeout_s=cfg.startup_timeout_s,
            )
        self._throttle.interval_s = cfg.progress_interval_s
        for job in self.jobs.values():
            w = job.watch
            w.floor_s, w.factor, w.window, w.startup_s = (
                cfg.hang_floor_s,
                cfg.hang_factor,
                cfg.hang_window_steps,
                cfg.startup_timeout_s,
            )

    # ------------------------------------------------------------------ admission and start
    def admit(self, args: StartWorkersArgs) -> None:
        """The node's own checks of a ``start_workers``; :class:`ArgsError` names the argument."""
        count = self._gpu_count()
        missing = [g for g in args.gpus if g >= count]
        if missing:
            raise ArgsError(
                f"GPU {missing[0]} does not exist on this node, which has {count} GPU(s) (indices 0..{count - 1})",
                "args.gpus",
            )
        current = self.jobs.get(args.job_id)
        if current is not None:
            raise ArgsError(
                f"job {args.job_id} generation {current.generation} still runs here; stop it before starting "
                f"generation {args.generation}",
                "args.generation",
            )
        busy = {w.plan.gpu: job.job_id for job in self.jobs.values() for w in job.running()}
        taken = [g for g in args.gpus if g in busy]
        if taken:
            raise ArgsError(f"GPU {taken[0]} is in use by job {busy[taken[0]]}", "args.gpus")

    async def start(self, args: StartWorkersArgs) -> StartWorkersResult:
        """Start one worker per GPU of ``args``; returns their pids. Raises (a failed command) when a worker
        cannot be started, after stopping the ones that were."""
        assert self.link is not None, "open() first"
        self.admit(args)  # again: another start may have taken the GPUs since the command was accepted
        directory = launch.run_dir(self.workers_dir, args.job_id, args.generation)
        job_file = launch.write_job_file(directory, args)
        control, control_endpoint = self.link.control_socket()
        plans = launch.plan_workers(
            args,
            python=self.python,
            directory=directory,
            job_file=job_file,
            progress_endpoint=self.link.progress_endpoint,
            control_endpoint=control_endpoint,
            real_gpus=self.real_gpus,
            base_env=self._base_env,
        )
        now = self.clock.monotonic()
        cfg = self.cfg
        watch = HangWatch.start(
            [p.rank for p in plans],
            now,
            floor_s=cfg.hang_floor_s,
            factor=cfg.hang_factor,
            window=cfg.hang_window_steps,
            startup_s=cfg.startup_timeout_s,
        )
        job = LocalJob(args=args, workers={}, control=control, watch=watch, started=now, spawning=True)
        self.jobs[args.job_id] = job
        self._has_jobs.set()
        try:
            for plan in plans:
                proc, warm = await self._launch(plan, warm_ok=not args.job.runtime.compile)
                job.workers[plan.rank] = Worker(plan=plan, proc=proc, warm=warm)
                self._tasks.add(asyncio.create_task(self._reap(job, job.workers[plan.rank]), name=f"reap:{proc.pid}"))
        except OSError as exc:
            job.ending = "faulted"
            await self._terminate(job)
            raise RuntimeError(f"cannot start rank {plan.rank}: {exc}") from exc
        finally:
            job.spawning = False
        if not job.running():  # every worker already exited while the others were starting
            self._finish(job)
        self.stats.started += len(plans)
        self._gpus_changed()
        pids = {str(rank): w.pid for rank, w in job.workers.items()}
        warm = sorted(rank for rank, w in job.workers.items() if w.warm)
        log.info(
            "workers started",
            job_id=args.job_id,
            generation=args.generation,
            pids=pids,
            warm_ranks=warm,
            dir=str(directory),
        )
        return StartWorkersResult(
            job_id=args.job_id, generation=args.generation, pids=pids, world_size=args.world_size, warm_ranks=warm
        )

    async def _launch(self, plan: launch.WorkerPlan, warm_ok: bool) -> tuple[asyncio.subprocess.Process, bool]:
        """A ready warm standby becomes the worker when there is one (and ``warm_ok``), else a cold spawn; the
        process and whether it was warm. Raises ``OSError``."""
        standby = self.warm.take() if warm_ok else None
        if standby is not None and await self.warm.hand(standby, plan):
            return standby.proc, True
        proc = await launch.spawn(plan)
        leftovers.record(self.workers_dir, proc.pid, "worker")
        return proc, False

    # ------------------------------------------------------------------ stop
    async def stop(self, job_id: str, generation: int, checkpoint: bool) -> StopWorkersResult:
        """Stop a job generation's local workers (see the module docstring); returns once every process is
        gone. A job or generation not running here is already stopped: that is a result, not an error."""
        job = self.jobs.get(job_id)
        if job is None or job.generation != generation:
            running = f"; generation {job.generation} runs here and is left running" if job else ""
            return StopWorkersResult(
                job_id=job_id, generation=generation, stopped=False, note=f"not running here{running}"
            )
        return await self._stop(job, checkpoint)

    async def stop_all(self, reason: str, checkpoint: bool = True) -> list[StopWorkersResult]:
        """Stop every local job (``drain``, the agent's SIGTERM)."""
        if self.jobs:
            log.warning("stopping every local job", reason=reason, jobs=sorted(self.jobs))
        return list(await asyncio.gather(*(self._stop(job, checkpoint) for job in list(self.jobs.values()))))

    async def _stop(self, job: LocalJob, checkpoint: bool) -> StopWorkersResult:
        if job.stop_task is None:
            job.stop_task = asyncio.create_task(self._stop_sequence(job, checkpoint), name=f"stop:{job.job_id}")
        return await asyncio.shield(job.stop_task)

    async def _stop_sequence(self, job: LocalJob, checkpoint: bool) -> StopWorkersResult:
        if job.ending is None:
            job.ending = "stopping"
        trained = [w for w in job.running() if w.state != "starting"]  # through their start-up
        for w in job.running():
            w.state = "stopping"
        asked = False
        if checkpoint and 0 in job.workers and job.running():
            for kind in ("checkpoint", "stop"):
                msg = ControlMessage(kind=kind, job_id=job.job_id, generation=job.generation)
                asked = send_control(job.control, msg) or asked
        if checkpoint:
            starting = len(job.running()) - len(trained)
            log.info("waiting for workers to checkpoint and stop", job_id=job.job_id, asked=asked, starting=starting)
            await wait_all(
                [asyncio.ensure_future(w.exited.wait()) for w in trained], self.clock, self.cfg.stop_timeout_s
            )
        terminated, killed = await self._terminate(job)
        await job.finished.wait()
        return StopWorkersResult(
            job_id=job.job_id,
            generation=job.generation,
            stopped=True,
            pids={str(r): w.pid for r, w in job.workers.items()},
            exit_codes={str(r): w.exit_code for r, w in job.workers.items()},
            last_step=job.last_step,
            asked_to_checkpoint=asked,
            terminated=terminated,
            killed=killed,
        )

    async def _terminate(self, job: LocalJob) -> tuple[list[int], list[int]]:
        """SIGTERM the groups still running, SIGKILL what is left after ``term_grace_s``; the ranks of each."""
        if not job.workers:
            self._forget(job)
            job.finished.set()
            return [], []
        terminated = [
            r for r, w in job.workers.items() if not w.exited.is_set() and signal_group(w.pid, signal.SIGTERM)
        ]
        waits = [asyncio.ensure_future(w.exited.wait()) for w in job.workers.values()]
        killed: list[int] = []
        if not await wait_all(waits, self.clock, self.cfg.term_grace_s):
            killed = [
                r for r, w in job.workers.items() if not w.exited.is_set() and signal_group(w.pid, signal.SIGKILL)
            ]
            await wait_all(waits, self.clock, KILL_WAIT_S)
        for w in waits:
            w.cancel()
        if terminated or killed:
            log.warning("workers signalled", job_id=job.job_id, sigterm=terminated, sigkill=killed)
        return terminated, killed

    # ------------------------------------------------------------------ exits
    async def _reap(self, job: LocalJob, worker: Worker) -> None:
        code = await worker.proc.wait()
        if self.link is not None:
            self.link.drain()  # what it said before it exited (its last step) counts
        worker.exit_code, worker.state = code, "exited"
        worker.exited.set()
        job.watch.forget(worker.plan.rank)
        self._gpus_changed()
        if code != 0 and job.ending is None:
            job.ending = "faulted"
            self._fault_exit(job, worker, code)
            self._tasks.add(asyncio.create_task(self._terminate(job), name=f"terminate:{job.job_id}"))
        if not job.running() and not job.spawning:
            self._finish(job)

    def _finish(self, job: LocalJob) -> None:
        record = self._throttle.flush(job.job_id)
        if record is not None:
            self._send_progress(record)
        if job.ending is None:
            self.stats.completed += 1
            self._publish(
                TrainingCompleted(
                    job_id=job.job_id,
                    generation=job.generation,
                    node_id=self.node_id,
                    ranks=sorted(job.workers),
                    last_step=job.last_step,
                    duration_s=max(0.0, self.clock.monotonic() - job.started),
                    simulated=not self.real_gpus,
                    export=self._export_of(job),
                ),
                urgent=True,
            )
            log.info("job finished on this node", job_id=job.job_id, generation=job.generation, step=job.last_step)
        self._forget(job)
        job.finished.set()

    def _export_of(self, job: LocalJob) -> ModelExport | None:
        """The job's export manifest, on the node of global rank 0 (the rank that writes it) when the job set
        ``export_path``. Only there: a shared folder would show other nodes the file too, or an older one."""
        rank0 = job.workers.get(0)
        export_path = job.args.job.checkpoint.export_path
        if rank0 is None or export_path is None or any(w.exit_code != 0 for w in job.workers.values()):
            return None
        path = manifest_path(export_path, rank0.plan.cwd)
        return read_export(path, job_id=job.job_id, generation=job.generation)

    def _forget(self, job: LocalJob) -> None:
        if self.jobs.get(job.job_id) is job:
            del self.jobs[job.job_id]
        if self.link is not None:
            self.link.close_control(job.control)
        else:
            job.control.close(linger=0)
        self._gpus_changed()

    def _fault_exit(self, job: LocalJob, worker: Worker, code: int) -> None:
        sig = signal_name(code)
        how = f"was killed by {sig}" if sig else f"exited with code {code}"
        message = f"rank {worker.plan.rank} (pid {worker.pid}) {how}; stopping the node's other workers"
        self._fault(job, worker, "worker_exit", message, exit_code=code if code >= 0 else None, signal=sig)

    def _fault(self, job: LocalJob, worker: Worker, kind: FaultKind, message: str, **fields: Any) -> None:
        fault = TrainingFault(
            job_id=job.job_id,
            generation=job.generation,
            node_id=self.node_id,
            kind=kind,
            rank=worker.plan.rank,
            pid=worker.pid,
            last_step=fields.pop("last_step", worker.last_step),
            log_tail=tail_lines(worker.plan.log_path, self.cfg.log_tail_lines),
            message=message,
            simulated=not self.real_gpus,
            **fields,
        )
        self.stats.faults += 1
        log.error("worker fault", job_id=job.job_id, kind=kind, rank=fault.rank, message=message)
        self._publish(fault, urgent=True)

    # ------------------------------------------------------------------ hangs
    def check_hangs(self) -> None:
        now = self.clock.monotonic()
        for job in list(self.jobs.values()):
            if job.ending is not None:
                continue
            hangs = job.watch.check(now)
            if hangs:
                self._hung(job, hangs)

    def _hung(self, job: LocalJob, hangs: list[Hang]) -> None:
        """Name the rank most likely at fault: a stopped process if any (then it is certainly its own), else
        the one silent longest. The others are silent because they wait for it in a collective."""
        stopped = [h for h in hangs if process_stopped(job.workers[h.rank].pid)]
        culprit = (stopped or hangs)[0]
        worker = job.workers[culprit.rank]
        job.ending = "faulted"
        silent = ", ".join(str(h.rank) for h in hangs)
        message = (
            f"rank {culprit.rank} silent for {culprit.silent_s:.1f} s (bound {culprit.bound_s:.1f} s, learned step "
            f"time {_seconds(job.watch.step_time_s)}); silent ranks here: {silent}"
            f"{' (process stopped)' if stopped else ''}; stopping the node's workers"
        )
        self._fault(
            job,
            worker,
            "worker_hang",
            message,
            last_step=culprit.last_step,
            silent_s=round(culprit.silent_s, 3),
            bound_s=round(culprit.bound_s, 3),
        )
        self._tasks.add(asyncio.create_task(self._terminate(job), name=f"terminate:{job.job_id}"))

    # ------------------------------------------------------------------ messages
    def on_frames(self, frames: list[bytes]) -> None:
        try:
            msg = decode(frames)
        except BadMessage as exc:
            self.stats.bad += 1
            self._warn.warn(log, "worker message dropped", reason=str(exc))
            return
        job = self.jobs.get(msg.job_id)
        worker = job.workers.get(msg.rank) if job is not None and job.generation == msg.generation else None
        if job is None or worker is None:
            self.stats.foreign += 1
            self._warn.warn(log, "message of a worker not running here", job_id=msg.job_id, rank=msg.rank)
            return
        now = self.clock.monotonic()
        if isinstance(msg, WorkerHeartbeat):
            self.stats.heartbeats += 1
            step = msg.step if msg.step >= 0 else None
        else:
            self.stats.progress_in += 1
            step = msg.step
            record = self._throttle.offer(msgspec.structs.replace(msg, node_id=self.node_id), now)
            if record is not None:
                self._send_progress(record)
        job.watch.heard(msg.rank, step, now)
        if step is not None:
            worker.saw_step(step)
        elif worker.state == "starting":
            worker.state = "running"

    def _send_progress(self, record: TrainingProgress) -> None:
        self.stats.progress_out += 1
        self._publish(record)

    def flush_progress(self) -> None:
        now = self.clock.monotonic()
        for job_id in self._throttle.pending_jobs():
            record = self._throttle.due(job_id, now)
            if record is not None:
                self._send_progress(record)

    def warm_target(self) -> int:
        """How many standbys to keep: ``warm_workers`` (default one per GPU); none while draining or closing."""
        if self.warm.closed or not self._accepting():
            return 0
        return self._gpu_count() if self.cfg.warm_workers is None else self.cfg.warm_workers

    def starting(self) -> bool:
        """A job's workers are starting here: some has not trained a step, and the start is recent enough.
        New standbys wait meanwhile, so their imports do not compete with that start-up on the CPU."""
        now = self.clock.monotonic()
        return any(
            job.ending is None
            and now - job.started < self.cfg.warm_refill_after_s
            and any(w.last_step is None for w in job.running())
            for job in self.jobs.values()
        )

    async def _warm_loop(self) -> None:
        while True:
            await self.clock.sleep(WARM_CHECK_S)
            try:
                await self.warm.reconcile(self.warm_target(), spawn=not self.starting())
            except Exception:  # the pool is kept up to date at the next check; workers start cold meanwhile
                log.error("warm pool upkeep failed", exc_info=True)

    async def _tick_loop(self) -> None:
        while True:
            if not self.jobs:  # nothing to watch: sleep until a job starts (an idle node costs nothing here)
                self._has_jobs.clear()
                await self._has_jobs.wait()
            await self.clock.sleep(TICK_S)
            self.flush_progress()
            self.check_hangs()

    # ------------------------------------------------------------------ views
    def workers(self) -> list[WorkerInfo]:
        return [info for job in self.jobs.values() for info in job.info()]

    def gpu_use(self) -> dict[int, list[int]]:
        use: dict[int, list[int]] = {}
        for job in self.jobs.values():
            for w in job.running():
                use.setdefault(w.plan.gpu, []).append(w.pid)
        return use

    def _gpus_changed(self) -> None:
        if self._on_gpu_use is not None:
            self._on_gpu_use(self.gpu_use())


def _seconds(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.3f} s"
