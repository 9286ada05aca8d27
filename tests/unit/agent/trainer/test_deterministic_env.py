"""The job's deterministic mode reaches every worker the agent starts: in the job file each rank loads, and as
cuBLAS's workspace setting in each worker's environment (read once, before the worker's first CUDA call)."""

from __future__ import annotations

from pathlib import Path

import pytest

from myolo.agent.trainer.launch import inherited_env, plan_workers, write_job_file
from myolo.events.payloads.commands import StartWorkersArgs
from myolo.events.payloads.trainer_job import TrainerJob
from myolo.kernels.train.config import JobConfig


def args(deterministic: bool) -> StartWorkersArgs:
    return StartWorkersArgs(
        job_id="tiny",
        generation=1,
        node_rank=1,
        nnodes=2,
        gpus=[0, 1, 2],
        master_addr="127.0.0.1",
        master_port=29500,
        job=TrainerJob.from_fields({"runtime.deterministic": deterministic}),
    )


@pytest.mark.parametrize("deterministic", [True, False])
def test_every_worker_gets_the_mode(tmp_path: Path, deterministic: bool) -> None:
    a = args(deterministic)
    job_file = write_job_file(tmp_path, a)
    plans = plan_workers(
        a,
        python=("python",),
        directory=tmp_path,
        job_file=job_file,
        progress_endpoint="ipc://p",
        control_endpoint="ipc://c",
        real_gpus=False,
        base_env={"PATH": "/usr/bin", "CUBLAS_WORKSPACE_CONFIG": ":16:8"},  # the agent's own
    )
    assert [p.rank for p in plans] == [3, 4, 5]
    assert all(p.args == ("--config", str(job_file)) for p in plans)
    assert JobConfig.load(job_file).runtime.deterministic is deterministic
    base = {"PATH": "/usr/bin", "CUBLAS_WORKSPACE_CONFIG": ":16:8"}
    cublas = [p.env.get("CUBLAS_WORKSPACE_CONFIG") for p in plans]
    # on: the job's setting, whatever the agent's environment said; off: what the workers inherit, untouched
    assert cublas == [":4096:8" if deterministic else inherited_env(base).get("CUBLAS_WORKSPACE_CONFIG")] * 3
