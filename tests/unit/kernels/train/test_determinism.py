"""Deterministic mode: two runs of a tiny job give bit-identical losses; off, the fastest kernels may run."""

from __future__ import annotations

import os

import pytest
import torch

from myolo.kernels.train import determinism
from myolo.kernels.train.config import JobConfig
from myolo.kernels.train.loop import run
from myolo.kernels.train.records import StepRecord

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")


@pytest.fixture(autouse=True)
def restore_torch_flags(monkeypatch: pytest.MonkeyPatch):
    """The mode is process-wide: leave it as the other tests found it."""
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
    )
    yield
    torch.use_deterministic_algorithms(before[0], warn_only=before[1])
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[2], before[3]


def losses(job: JobConfig) -> list[float]:
    return [r.loss for r in run(job).records if isinstance(r, StepRecord)]


def test_two_deterministic_runs_give_bit_identical_losses() -> None:
    job = {"optimizer.steps": 3, "data.global_batch": 2, "data.seq_len": 16, "runtime.device": "cpu", "runtime.seed": 7}
    first = losses(JobConfig.from_fields(job))
    torch.manual_seed(12345)  # whatever ran before in this process: the mode seeds what it needs
    second = losses(JobConfig.from_fields(job))
    assert len(first) == 3 and first == second  # == on floats: bit for bit
    assert torch.are_deterministic_algorithms_enabled()
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"


def test_the_mode_is_on_by_default_and_off_lets_cudnn_benchmark() -> None:
    assert JobConfig().runtime.deterministic is True
    determinism.apply(True, 0)
    assert torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.deterministic
    assert not torch.backends.cudnn.benchmark
    determinism.apply(False, 0)
    assert not torch.are_deterministic_algorithms_enabled() and not torch.backends.cudnn.deterministic
    assert torch.backends.cudnn.benchmark
    assert "deterministic=off cudnn.benchmark=True" in determinism.describe()


def test_a_user_choice_of_cublas_workspace_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    determinism.apply(True, 0)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
