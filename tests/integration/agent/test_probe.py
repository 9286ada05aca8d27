"""The bandwidth probe with real processes: gloo, 2 ranks, small sizes; and its failure modes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from pathlib import Path

import psutil
import pytest

from myolo.agent.nccl.probe import ProbeError, ProbeSpec, run_probe
from tests.support.helpers import wait_until

ROOT = str(Path(__file__).resolve().parents[3])


async def test_gloo_two_ranks_sweep() -> None:
    spec = ProbeSpec(world_size=2, backend="gloo", sizes=(4096, 65536, 1 << 20), warmup=1, iters=3)
    report = await run_probe("node-1", spec, timeout_s=240, cwd=ROOT, command_id="probe-1")
    assert report.backend == "gloo" and report.world_size == 2 and report.command_id == "probe-1"
    assert [p.size_bytes for p in report.points] == [4096, 65536, 1 << 20]
    for p in report.points:
        assert p.time_s > 0
        assert p.algbw_gbps == pytest.approx(p.size_bytes / p.time_s / 1e9)
        assert p.busbw_gbps == pytest.approx(p.algbw_gbps)  # 2(n-1)/n = 1 for two ranks


async def test_missing_torch_is_a_clear_error() -> None:
    # -S drops site-packages: the stdlib is there, torch is not, exactly like an agent-only venv
    with pytest.raises(ProbeError, match="torch is not installed"):
        await run_probe("node-1", ProbeSpec(backend="gloo"), timeout_s=60, python=(sys.executable, "-S"), cwd=ROOT)


def marked(mark: str) -> list[psutil.Process]:
    """Live processes whose environment carries ``mark`` (a probe's children inherit it)."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get("MYOLO_TEST_MARK") == mark:
                found.append(proc)
    return found


async def test_timeout_kills_the_probe_and_what_it_spawned() -> None:
    # A probe that cannot finish: it starts a child (as the sweep spawns its ranks), then waits on it forever.
    never = ("sh", "-c", "sleep 3600 & wait", "probe")  # the probe's own arguments land in $1..., unused
    mark = uuid.uuid4().hex
    try:
        with pytest.raises(ProbeError, match=r"did not finish within 2 s and was killed"):
            env = {**os.environ, "MYOLO_TEST_MARK": mark}
            probe = run_probe("node-1", ProbeSpec(backend="gloo"), timeout_s=2, python=never, env=env)
            await asyncio.wait_for(probe, 60)  # a hang guard: the probe's own timeout must end it
        # its whole process group was killed: the child too (an orphan is reaped by init, not by us)
        await wait_until(lambda: not marked(mark), timeout=30, what="the probe's child gone with its process group")
    finally:
        for proc in marked(mark):
            proc.kill()


async def test_nccl_backend_runs_on_gpus_or_is_refused_without_them() -> None:
    import torch

    spec = ProbeSpec(world_size=2, backend="nccl", sizes=(1 << 20,), warmup=1, iters=3)
    if torch.cuda.device_count() >= 2:
        report = await run_probe("node-1", spec, timeout_s=240, cwd=ROOT)
        assert report.backend == "nccl" and report.points[0].busbw_gbps > 0
        return
    with pytest.raises(ProbeError, match="needs 2 GPUs"):
        await run_probe("node-1", spec, timeout_s=120, cwd=ROOT)
