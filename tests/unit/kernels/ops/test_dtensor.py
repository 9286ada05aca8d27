"""DTensor (sequence-parallel) inputs go to a DTensor-capable backend and match the reference, on 2 real
gloo processes, even when raw kernels are preferred."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kernels.parallel import rendezvous
from tests.support.kernels.ranks import rank_env

WORKER = Path(__file__).parents[3] / "support" / "kernels" / "ops_dtensor_worker.py"
ROOT = Path(__file__).parents[4]


def test_dtensor_inputs_use_dtensor_capable_backends(tmp_path):
    store = rendezvous.host_store()
    procs = []
    for rank in range(2):
        env = rank_env(store, rank, 2, MYOLO_CACHE_DIR=str(tmp_path), TRITON_INTERPRET="1")
        cmd = [sys.executable, str(WORKER)]
        procs.append(
            subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(r["rank"] for r in results) == [0, 1]
    for r in results:
        # Plain tensors would get the Triton kernels (interpreter on) ...
        assert r["configured"]["residual_rms_norm"] == "triton" and r["configured"]["cross_entropy"] == "triton"
        # ... but the DTensor calls must have run on native (DTensor sharding rules).
        assert r["selected"] == dict.fromkeys(
            ["residual_rms_norm", "rms_norm", "cross_entropy", "adamw", "layer_norm", "attention"], "native"
        ), r
