"""Wiring of the training supervisor (``myolo.agent.trainer``) into the running agent.

The supervisor publishes through the agent's spool (so progress and faults survive a Kafka outage like any
event), learns the node's GPU count from the backend, and on simulated GPUs tells the simulator (and the file
``myolo-agent sample`` reads) which workers run where. ``start_workers`` is admitted only after the node's
checks and the trainer's own check of the job, so a bad one is rejected with nothing started.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from myolo.agent.commands import ActionFn
from myolo.agent.commands.args import ArgsError
from myolo.agent.commands.executor import AdmitFn
from myolo.agent.daemon.runtime import Runtime
from myolo.agent.gpu.sim import SimBackend
from myolo.agent.releases.env import trainer_env
from myolo.agent.trainer.check import check_job
from myolo.agent.trainer.gpu_use import write_gpu_use
from myolo.events.payloads import StartWorkersArgs
from myolo.events.payloads.commands import StartWorkersResult, StopWorkersArgs, StopWorkersResult

if TYPE_CHECKING:
    from myolo.agent.daemon.trainer_trial import TrainerTrial
    from myolo.agent.trainer.supervisor import Supervisor

log = structlog.get_logger("myolo.agent.daemon")


def trainer_python(rt: Runtime) -> tuple[str, ...]:
    """The interpreter that has torch and the trainer: ``trainer.python``, else the agent's own."""
    return tuple(rt.cfg.trainer.python) or (sys.executable,)


def worker_env(rt: Runtime) -> dict[str, str]:
    """The workers' (and the job check's) environment: the agent's, the trainer's current release first on
    PYTHONPATH (``[releases]``; a link, so it follows later upgrades of the trainer)."""
    return trainer_env(os.environ, rt.cfg.releases.dir)


def build_supervisor(rt: Runtime) -> Supervisor:
    from myolo.agent.trainer.supervisor import Supervisor  # ZeroMQ only on nodes that run workers

    workers_dir = Path(rt.cfg.trainer.workers_dir)
    backend = rt.backend

    def gpu_use(use: dict[int, list[int]]) -> None:
        if isinstance(backend, SimBackend):
            backend.set_workload(use)
        write_gpu_use(workers_dir, use)

    return Supervisor(
        rt.cfg.trainer,
        node_id=rt.cfg.node_id,
        clock=rt.clock,
        publish=rt.publisher.publish,
        workers_dir=workers_dir,
        gpu_count=backend.device_count,
        real_gpus=backend.name == "nvml",
        python=trainer_python(rt),
        on_gpu_use=gpu_use,
        base_env=worker_env(rt),
        socket_dir=Path(rt.cfg.control_socket).parent,
        accepting=lambda: not rt.draining,  # a draining node keeps no warm standby
    )


def trainer_actions(sup: Supervisor) -> dict[str, ActionFn]:
    """``start_workers`` and ``stop_workers``."""

    async def start_workers(args: StartWorkersArgs) -> StartWorkersResult:
        return await sup.start(args)

    async def stop_workers(args: StopWorkersArgs) -> StopWorkersResult:
        return await sup.stop(args.job_id, args.generation, args.checkpoint)

    return {"start_workers": start_workers, "stop_workers": stop_workers}


def trainer_admissions(rt: Runtime, sup: Supervisor, trial: TrainerTrial) -> dict[str, AdmitFn]:
    """The admission check of ``start_workers``: the node's checks, then the trainer's own, which is also the
    trial of a new trainer release (``trainer_trial.py``): a check that cannot run takes the release back."""

    async def admit_start(args: StartWorkersArgs) -> None:
        if rt.draining:
            why = f" ({rt.drain_reason})" if rt.drain_reason else ""
            raise ArgsError(f"this node is draining{why}: no new workers start here", "action")
        sup.admit(args)
        check = check_job(
            sup.python,
            args.job,
            args.world_size,
            rt.cfg.trainer.check_timeout_s,
            env=worker_env(rt),
            cwd=sup.workers_dir,
        )
        await trial.judge(check, "send the command again")

    return {"start_workers": admit_start}


def nccl_globs(rt: Runtime) -> list[str]:
    """The configured NCCL log globs, plus the logs of the workers this agent starts."""
    globs = list(rt.cfg.nccl.log_globs)
    if rt.trainer is not None:
        globs.append(str(Path(rt.cfg.trainer.workers_dir) / "*" / "g*" / "nccl-rank-*.log"))
    return globs
