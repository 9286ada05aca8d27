"""myolo.kernels.ops.gpu_check is meant for a CUDA machine; here its logic runs on tiny CPU shapes (with the
Triton interpreter), and without CUDA the default invocation says so and exits 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).parents[4]


def _run(args: list[str], tmp_path: Path, **extra_env: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MYOLO_AUTOTUNE_CACHE": str(tmp_path / "autotune.json"), "PYTHONPATH": str(ROOT), **extra_env}
    return subprocess.run(
        [sys.executable, "-m", "myolo.kernels.ops.gpu_check", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_gpu_check_logic_on_cpu(tmp_path):
    out = tmp_path / "gpu_check.json"
    proc = _run(
        ["--device", "cpu", "--small", "--reps", "1", "--dtype", "float32", "--out", str(out)],
        tmp_path,
        TRITON_INTERPRET="1",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["all_numerics_ok"] is True
    per_op = report["dtypes"]["float32"]
    assert set(per_op["residual_rms_norm"]["backends"]) == {"native", "triton", "reference"}
    assert set(per_op["cross_entropy"]["backends"]) == {"native", "triton", "reference"}
    assert per_op["adamw"]["backends"]["native"]["numerics_ok"] is True
    assert "error" in per_op["attention"]["backends"]["native[CUDNN_ATTENTION]"]  # CUDA-only, reported
    assert per_op["residual_rms_norm"]["unavailable"]["apex"] == "apex kernels need a CUDA device, got cpu"
    assert len(per_op["attention_autotune"]) == 1


def test_gpu_check_without_cuda_says_so(tmp_path):
    if torch.cuda.is_available():  # on a GPU machine the real check runs instead; nothing to assert here
        return
    proc = _run([], tmp_path)
    assert proc.returncode == 2
    assert "no CUDA device" in proc.stdout
