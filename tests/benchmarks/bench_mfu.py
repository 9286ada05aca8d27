"""Model FLOPs utilisation of the trainer -> results/mfu.json: ``1b`` in bf16 on one GPU (target >= 45 % of the
dense bf16 peak, 989 TFLOP/s on an H100/H200).

Runs ``myolo-train`` (``python -m myolo.kernels.cli.launch --json``) for ``--steps`` steps, drops the first
``--warmup`` (compilation, allocator warm-up) and reports the median tokens/s and MFU of the rest, as the
trainer computes it (``myolo.kernels.model.flops``: 6 x non-embedding parameters + attention, against the dense peak).
Without a CUDA device it writes why and exits 0 (``make bench`` on this machine); ``--device cpu --model tiny``
runs the same path as a smoke test.
Run: python tests/benchmarks/bench_mfu.py [--model 1b --seq-len 4096 --global-batch 4 --steps 30 --no-compile]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.benchmarks.common import write_result  # noqa: E402

TARGET = 0.45


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="1b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--global-batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True)
    opts = parser.parse_args()
    if opts.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            write_result("mfu", {"skipped": "no CUDA device on this machine", "target": TARGET})
            return
    cmd = [
        sys.executable, "-m", "myolo.kernels.cli.launch", "--nproc", "1", "--model", opts.model, "--device", opts.device,
        "--seq-len", str(opts.seq_len), "--global-batch", str(opts.global_batch), "--steps", str(opts.steps),
        "--compile" if opts.compile else "--no-compile", "--json",
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    steps = [r for r in records if r.get("event") == "step"][opts.warmup :]
    start = next((r for r in records if r.get("event") == "start"), {})
    if proc.returncode != 0 or not steps:
        write_result("mfu", {"error": proc.stderr[-3000:], "command": cmd, "target": TARGET})
        raise SystemExit(1)
    mfus = [r["mfu"] for r in steps if r.get("mfu") is not None]
    result = {
        "command": cmd,
        "model": opts.model,
        "device": start.get("device"),
        "dtype": start.get("dtype"),
        "params": start.get("params"),
        "steps_measured": len(steps),
        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in steps),
        "step_time_s": statistics.median(r["step_time_s"] for r in steps),
        "mfu": statistics.median(mfus) if mfus else None,
        "target": TARGET,
        "met": (statistics.median(mfus) >= TARGET) if mfus else None,
        "peak_memory_bytes": max((r.get("mem_allocated_bytes") or 0) for r in steps) or None,
    }
    write_result("mfu", result)


if __name__ == "__main__":
    main()
