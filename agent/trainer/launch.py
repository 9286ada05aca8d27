"""How a worker process is started: its argv, its torchrun-style environment, its files.

Each worker runs ``<trainer python> -m myolo.kernels.cli.worker --config <job.json>`` in a session of its own (so a
stop signals its whole process group: compile workers and data loaders included), with stdout and stderr in
``<run dir>/rank-<R>.log`` and NCCL's debug log in ``<run dir>/nccl-rank-<R>.log`` (which the agent's NCCL
follower parses). On simulated GPUs ``CUDA_VISIBLE_DEVICES`` is empty, so the worker trains on the CPU
with gloo; on a real node it is the worker's GPU index.

A warm standby (``myolo.agent.trainer.warm``) is started the same way with the same interpreter, directory base and
environment less the per-worker variables; handed a plan, it becomes that worker.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from myolo.events.payloads.commands import StartWorkersArgs
from myolo.events.payloads.trainer_job import CUBLAS_WORKSPACE_CONFIG

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
# variables of a parent's own launch that must not leak into a worker the agent starts
_DROPPED = ("TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RUN_ID", "MYOLO_ZMQ_PROGRESS", "MYOLO_ZMQ_CONTROL")
# set per worker by plan_workers (OMP_NUM_THREADS too, unless the agent's environment sets it)
PER_WORKER = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "ROLE_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "MYOLO_JOB_ID",
    "MYOLO_GENERATION",
    "MYOLO_ZMQ_PROGRESS",
    "MYOLO_ZMQ_CONTROL",
    "NCCL_DEBUG",
    "NCCL_DEBUG_FILE",
    "CUDA_VISIBLE_DEVICES",
)
WORKER_MODULE = "myolo.kernels.cli.worker"
AGENT_PID_VAR = "MYOLO_AGENT_PID"  # read by myolo.kernels.worker.orphan
STANDBY_MODULE = "myolo.kernels.cli.warm"


@dataclass(frozen=True)
class WorkerPlan:
    rank: int
    local_rank: int
    gpu: int
    argv: tuple[str, ...]  # <python> -m myolo.kernels.cli.worker <args>
    args: tuple[str, ...]  # the worker's own arguments (what a warm standby is handed)
    env: Mapping[str, str]
    cwd: Path
    log_path: Path
    nccl_log: Path


def run_dir(workers_dir: Path, job_id: str, generation: int) -> Path:
    """``<workers_dir>/<job>/g<generation>``; the job id is made safe for a path (it came from a command): no
    separator, and a name of dots only (``..``) loses them, so the directory stays under ``workers_dir``."""
    name = _UNSAFE.sub("_", job_id)[:128]
    if not name.strip("."):
        name = name.replace(".", "_")
    return workers_dir / name / f"g{generation}"


def rank_log(directory: Path, rank: int) -> Path:
    """A worker's stdout and stderr in its run directory."""
    return directory / f"rank-{rank}.log"


def write_job_file(directory: Path, args: StartWorkersArgs) -> Path:
    """The trainer's job file (JSON, ``JobConfig`` fields), written once for all ranks of this node."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "job.json"
    body = msgspec.to_builtins(args.job)
    body["job_id"] = args.job_id
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(msgspec.json.encode(body))
    os.replace(tmp, path)
    return path


def plan_workers(
    args: StartWorkersArgs,
    *,
    python: Sequence[str],
    directory: Path,
    job_file: Path,
    progress_endpoint: str,
    control_endpoint: str,
    real_gpus: bool,
    base_env: Mapping[str, str],
) -> list[WorkerPlan]:
    """One plan per GPU in ``args.gpus``: local rank i gets ``args.gpus[i]`` and global rank
    ``node_rank x len(gpus) + i``."""
    local_world = len(args.gpus)
    plans = []
    for local_rank, gpu in enumerate(args.gpus):
        rank = args.global_rank(local_rank)
        nccl_log = directory / f"nccl-rank-{rank}.log"
        env = inherited_env(base_env)
        env.update(
            RANK=str(rank),
            WORLD_SIZE=str(args.world_size),
            LOCAL_RANK=str(local_rank),
            LOCAL_WORLD_SIZE=str(local_world),
            GROUP_RANK=str(args.node_rank),
            ROLE_RANK=str(rank),
            MASTER_ADDR=args.master_addr,
            MASTER_PORT=str(args.master_port),
            MYOLO_JOB_ID=args.job_id,
            MYOLO_GENERATION=str(args.generation),
            MYOLO_ZMQ_PROGRESS=progress_endpoint,
            MYOLO_ZMQ_CONTROL=control_endpoint,
            NCCL_DEBUG="INFO",
            NCCL_DEBUG_FILE=str(nccl_log),
            CUDA_VISIBLE_DEVICES=str(gpu) if real_gpus else "",
        )
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // local_world)))
        if args.job.runtime.deterministic:  # read once, when cuBLAS starts: set before the worker's first CUDA call
            env["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE_CONFIG
        worker_args = ("--config", str(job_file))
        plans.append(
            WorkerPlan(
                rank=rank,
                local_rank=local_rank,
                gpu=gpu,
                argv=(*python, "-m", WORKER_MODULE, *worker_args),
                args=worker_args,
                env=env,
                cwd=directory,
                log_path=rank_log(directory, rank),
                nccl_log=nccl_log,
            )
        )
    return plans


def inherited_env(base_env: Mapping[str, str]) -> dict[str, str]:
    """What every worker and standby inherits from the agent: its environment less a parent launch's own
    variables, unbuffered (the logs are read while the worker runs), and the agent's pid."""
    env = {k: v for k, v in base_env.items() if k not in _DROPPED}
    env["PYTHONUNBUFFERED"] = "1"
    env[AGENT_PID_VAR] = str(os.getpid())  # the worker dies with this process (myolo.kernels.worker.orphan)
    return env


def standby_env(base_env: Mapping[str, str]) -> dict[str, str]:
    """A standby's environment: a worker's less the per-worker variables it is handed later, and no GPU
    until then (were CUDA set up before the handoff, it would see none rather than a wrong one)."""
    env = {k: v for k, v in inherited_env(base_env).items() if k not in PER_WORKER}
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


async def spawn(plan: WorkerPlan) -> asyncio.subprocess.Process:
    """Start one worker in a new session, its output appended to its log. Raises ``OSError``."""
    with plan.log_path.open("ab") as log:
        return await asyncio.create_subprocess_exec(
            *plan.argv,
            cwd=plan.cwd,
            env=dict(plan.env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
