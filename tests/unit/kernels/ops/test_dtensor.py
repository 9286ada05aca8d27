"""DTensor (sequence-parallel) inputs go to a DTensor-capable backend and match the reference, on 2 real
gloo processes, even when raw kernels are preferred."""

from __future__ import annotations

from pathlib import Path

from tests.support.kernels.ranks import run_ranks

WORKER = Path(__file__).parents[3] / "support" / "kernels" / "ops_dtensor_worker.py"


def test_dtensor_inputs_use_dtensor_capable_backends(tmp_path):
    results = run_ranks([str(WORKER)], timeout=120, MYOLO_CACHE_DIR=str(tmp_path), TRITON_INTERPRET="1")
    assert sorted(r["rank"] for r in results) == [0, 1]
    for r in results:
        # Plain tensors would get the Triton kernels (interpreter on) ...
        assert r["configured"]["residual_rms_norm"] == "triton" and r["configured"]["cross_entropy"] == "triton"
        # ... but the DTensor calls must have run on native (DTensor sharding rules).
        assert r["selected"] == dict.fromkeys(
            ["residual_rms_norm", "rms_norm", "cross_entropy", "adamw", "layer_norm", "attention"], "native"
        ), r
