"""The bandwidth probe with real processes: gloo, 2 ranks, small sizes; and its failure modes."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from agent.nccl.probe import ProbeError, ProbeSpec, run_probe

ROOT = str(Path(__file__).resolve().parents[3])


async def test_gloo_two_ranks_sweep() -> None:
    spec = ProbeSpec(world_size=2, backend="gloo", sizes=(4096, 65536, 1 << 20), warmup=1, iters=3)
    report = await run_probe("node-1", spec, timeout_s=240, cwd=ROOT, command_id="probe-1")
    assert report.backend == "gloo" and report.world_size == 2 and report.command_id == "probe-1"
    assert [p.size_bytes for p in report.points] == [4096, 65536, 1 << 20]
    for p in report.points:
        assert 0 < p.time_s < 5
        assert p.algbw_gbps == pytest.approx(p.size_bytes / p.time_s / 1e9)
        assert p.busbw_gbps == pytest.approx(p.algbw_gbps)  # 2(n-1)/n = 1 for two ranks


async def test_missing_torch_is_a_clear_error() -> None:
    # -S drops site-packages: the stdlib is there, torch is not, exactly like an agent-only venv
    with pytest.raises(ProbeError, match="torch is not installed"):
        await run_probe("node-1", ProbeSpec(backend="gloo"), timeout_s=60, python=(sys.executable, "-S"), cwd=ROOT)


async def test_timeout_kills_the_probe() -> None:
    start = time.monotonic()
    with pytest.raises(ProbeError, match=r"did not finish within 0\.5 s"):
        await run_probe("node-1", ProbeSpec(backend="gloo"), timeout_s=0.5, cwd=ROOT)
    assert time.monotonic() - start < 10


async def test_nccl_backend_runs_on_gpus_or_is_refused_without_them() -> None:
    import torch

    spec = ProbeSpec(world_size=2, backend="nccl", sizes=(1 << 20,), warmup=1, iters=3)
    if torch.cuda.device_count() >= 2:
        report = await run_probe("node-1", spec, timeout_s=240, cwd=ROOT)
        assert report.backend == "nccl" and report.points[0].busbw_gbps > 0
        return
    with pytest.raises(ProbeError, match="needs 2 GPUs"):
        await run_probe("node-1", spec, timeout_s=120, cwd=ROOT)
