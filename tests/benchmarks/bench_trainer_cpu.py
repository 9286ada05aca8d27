"""CPU trainer benchmark -> tests/benchmarks/results/trainer_cpu.json.

1. ``small`` preset (~125M) in one process: tokens/s eager vs ``--compile`` (torch.compile per block),
   and eager per op backend (torch-native vs the plain reference), each over a few short steps.
2. The 3D layouts' median step time against one process for the same global batch (tiny-ish model,
   real gloo processes through ``myolo-train``).

Figures on a shared 2-core machine are noisy; the JSON records the load average next to them.
Run: .venv/bin/python tests/benchmarks/bench_trainer_cpu.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "benchmarks" / "results" / "trainer_cpu.json"
WARMUP, MEASURED = 2, 3


def single_process(name: str, fields: dict | None = None) -> dict:
    """Train ``small`` in this process (no process group), ``fields`` by path changed; tokens/s over the steps
    after warm-up."""
    import torch

    from myolo.kernels.train.config import JobConfig
    from myolo.kernels.train.loop import run
    from myolo.kernels.train.records import StepRecord

    torch.set_num_threads(os.cpu_count() or 1)
    base = {"model.name": "small", "data.global_batch": 4, "data.seq_len": 64, "optimizer.steps": WARMUP + MEASURED}
    job = JobConfig.from_fields({**base, **(fields or {})})
    t0 = time.perf_counter()
    recs = [r for r in run(job).records if isinstance(r, StepRecord)]
    wall = time.perf_counter() - t0
    timed = [r.step_time_s for r in recs[WARMUP:]]
    step_s = statistics.median(timed)
    result = {
        "name": name,
        "tokens_per_step": job.data.global_batch * job.data.seq_len,
        "median_step_s": step_s,
        "tokens_per_s": job.data.global_batch * job.data.seq_len / step_s,
        "first_step_s": recs[0].step_time_s,  # includes compilation under --compile
        "wall_s": wall,
        "backends": recs[-1].backends,
    }
    print(json.dumps(result), flush=True)
    return result


LAYOUT_ARGS = [
    "--model",
    "tiny",
    "--model-arg",
    "dim=128",
    "--model-arg",
    "n_layers=4",
    "--model-arg",
    "vocab_size=1024",
    "--global-batch",
    "16",
    "--seq-len",
    "64",
    "--steps",
    "6",
    "--seed",
    "0",
    "--json",
]
LAYOUTS = {
    "1 process": ["--nproc", "1"],
    "pp2 x tp2": ["--nproc", "4", "--pp", "2", "--tp", "2"],
    "dp2 x tp2": ["--nproc", "4", "--dp", "2", "--tp", "2"],
    "pp2 x dp2 x tp2": ["--nproc", "8", "--pp", "2", "--dp", "2", "--tp", "2"],
}


def layout(name: str, args: list[str]) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "myolo.kernels.cli.launch", *LAYOUT_ARGS, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    if proc.returncode:
        raise RuntimeError(f"{name} failed:\n{proc.stderr[-3000:]}")
    steps = [json.loads(x) for x in proc.stdout.splitlines() if '"event": "step"' in x]
    times = [r["step_time_s"] for r in steps[1:]]  # first step pays for warm-up
    result = {"layout": name, "median_step_s": statistics.median(times), "final_loss": steps[-1]["loss"]}
    print(json.dumps(result), flush=True)
    return result


def main() -> None:
    t0 = time.perf_counter()
    small = [
        single_process("eager, native ops"),
        single_process("compile per block, native ops", {"runtime.compile": True}),
        single_process("eager, reference ops", {"runtime.ops_prefer": {"*": ["reference"]}}),
    ]
    eager, compiled = small[0]["tokens_per_s"], small[1]["tokens_per_s"]
    layouts = [layout(n, a) for n, a in LAYOUTS.items()]
    base = layouts[0]["median_step_s"]
    for r in layouts:
        r["vs_1_process"] = r["median_step_s"] / base
    report = {
        "benchmark": "trainer_cpu",
        "cpu_count": os.cpu_count(),
        "load_avg_1m_at_end": os.getloadavg()[0],
        "small_one_process": small,
        "compile_speedup": compiled / eager,
        "layouts_same_global_batch": {"global_batch": 16, "seq_len": 64, "results": layouts},
        "total_s": time.perf_counter() - t0,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {OUT} in {report['total_s']:.0f} s", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
