"""Resume at a different size: the elastic-resize check, through ``myolo-train`` (real gloo processes).

The global batch at step s depends on (seed, s) only and gradient accumulation absorbs dp, so a job
checkpointed at dp=2 x tp=2 and resumed at dp=1 x tp=2 must continue exactly like a dp=1 x tp=2 run that
was never interrupted (up to fp32 rounding of the different reduction order).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from myolo.kernels.checkpoint import read_marker
from myolo.kernels.checkpoint.layout import default_snapshot_root
from myolo.kernels.checkpoint.marker import Marker, write_marker

REPO = Path(__file__).resolve().parents[3]
STEPS = 10
COMMON = ["--model", "tiny", "--steps", str(STEPS), "--seed", "0", "--global-batch", "8", "--seq-len", "32", "--json"]
DP2_TP2 = ["--nproc", "4", "--dp", "2", "--tp", "2"]
DP1_TP2 = ["--nproc", "2", "--dp", "1", "--tp", "2"]
RTOL, ATOL = 1e-5, 1e-6  # fp32: same math, different reduction order


def run(*args: str, env: dict[str, str] | None = None, ok: bool = True) -> list[dict]:
    """Run myolo-train and return its JSON records (start/step/end)."""
    proc = subprocess.run(
        [sys.executable, "-m", "myolo.kernels.cli.launch", *COMMON, *args],
        cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=400,
    )
    if ok:
        assert proc.returncode == 0, proc.stderr[-3000:]
    else:
        assert proc.returncode != 0, "the run was expected to fail (injected fault)"
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def step_losses(records: list[dict]) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in records if r["event"] == "step"}


def assert_close(got: dict[int, float], want: dict[int, float], steps: range) -> None:
    assert sorted(got) == list(steps), f"resumed run ran steps {sorted(got)}, expected {list(steps)}"
    for s in steps:
        assert abs(got[s] - want[s]) <= ATOL + RTOL * abs(want[s]), (s, got, want)


@pytest.fixture(scope="module")
def reference() -> dict[int, float]:
    """The uninterrupted dp=1 x tp=2 run."""
    losses = step_losses(run(*DP1_TP2))
    assert sorted(losses) == list(range(1, STEPS + 1))
    assert losses[1] != losses[STEPS]  # it trained
    return losses


@pytest.fixture
def job_id() -> Iterator[str]:
    jid = f"itest-resume-{os.getpid()}-{time.monotonic_ns()}"
    yield jid
    for p in Path("/dev/shm").glob(f"myolo-{jid}-*"):
        shutil.rmtree(p, ignore_errors=True)


def test_checkpoint_at_dp2_resumes_at_dp1_with_identical_losses(
    tmp_path: Path, reference: dict[int, float], job_id: str
) -> None:
    big = tmp_path / "dp2"
    first = run(*DP2_TP2, "--checkpoint-dir", str(big), "--checkpoint-every", "5", "--job-id", job_id)
    assert_close(step_losses(first), reference, range(1, STEPS + 1))  # dp=2 trains like dp=1
    marker = read_marker(big)
    assert marker is not None and (marker.step, marker.world_size) == (10, 4)
    assert (big / "step-00000005" / ".metadata").exists()
    # Files written by four ranks: each rank's shard of the FSDP x TP parameters and optimizer state.
    assert len(list((big / "step-00000005").glob("__*_0.distcp"))) == 4

    # The job is resized after step 5: keep only that checkpoint, marked as the latest.
    small = tmp_path / "dp1"
    small.mkdir()
    shutil.copytree(big / "step-00000005", small / "step-00000005")
    write_marker(small, Marker(step=5, path="step-00000005", kind="async", world_size=4, saved_at=0.0))

    resumed = run(*DP1_TP2, "--checkpoint-dir", str(small), "--resume", "--job-id", job_id)
    start = next(r for r in resumed if r["event"] == "start")
    assert start["start_step"] == 6
    assert_close(step_losses(resumed), reference, range(6, STEPS + 1))


def test_process_failure_resumes_from_shared_memory_snapshot_at_another_size(
    tmp_path: Path, reference: dict[int, float], job_id: str
) -> None:
    """Snapshot every step, disk every 5: rank 1 dies at step 8, so the disk holds step 5 but /dev/shm
    holds step 7; the restart (at dp=1) loses no finished step."""
    ckpt = tmp_path / "ckpt"
    args = ["--checkpoint-dir", str(ckpt), "--checkpoint-every", "5", "--snapshot-every", "1", "--job-id", job_id]
    crashed = run(*DP2_TP2, *args, env={"MYOLO_INJECT_FAULT": "rank=1,step=8"}, ok=False)
    assert max(step_losses(crashed)) == 7
    shm = default_snapshot_root(ckpt, job_id)
    snap = read_marker(shm)
    assert snap is not None and (snap.step, snap.kind, snap.world_size) == (7, "snapshot", 4)
    disk = read_marker(ckpt)
    assert disk is not None and disk.step >= 5  # the async save, maybe a persisted snapshot after it

    resumed = run(*DP1_TP2, *args, "--resume")
    assert next(r for r in resumed if r["event"] == "start")["start_step"] == 8
    assert_close(step_losses(resumed), reference, range(8, STEPS + 1))
