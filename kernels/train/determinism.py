"""Deterministic mode: the same job, data and seed give bit-identical losses; off, the fastest kernels run.

On: ``torch.use_deterministic_algorithms`` (``warn_only``: an op without a deterministic kernel warns, naming
itself, instead of killing a job that ran before this mode existed), cuDNN's deterministic algorithms without
autotuning, cuBLAS's fixed workspace (``CUBLAS_WORKSPACE_CONFIG``, read when cuBLAS starts: the agent puts it
in the workers' environment, and this sets it when the trainer runs alone), and torch's generators seeded from
the job's seed (data order is drawn from it already; dropout and anything else drawing from the global
generators follow). Off: cuDNN benchmarks its algorithms per shape and keeps the fastest, whose results may differ in the
last bits from run to run — which is why a migration that turns the mode on can move accuracy.
"""

from __future__ import annotations

import os

import torch

from myolo.events.payloads.trainer_job import CUBLAS_WORKSPACE_CONFIG


def apply(deterministic: bool, seed: int) -> None:
    """Set the process up for ``deterministic`` (before the first CUDA call, so cuBLAS sees its workspace)."""
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE_CONFIG)
    torch.use_deterministic_algorithms(deterministic, warn_only=True)
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.cudnn.benchmark = not deterministic
    if deterministic:
        torch.manual_seed(seed)  # every device's generator; the trainer draws from torch's alone


def describe() -> str:
    """What the process runs with, for the start record and logs."""
    on = torch.are_deterministic_algorithms_enabled()
    cublas = os.environ.get("CUBLAS_WORKSPACE_CONFIG", "unset")
    return (
        f"deterministic={'on' if on else 'off'} cudnn.benchmark={torch.backends.cudnn.benchmark} "
        f"CUBLAS_WORKSPACE_CONFIG={cublas}"
    )
