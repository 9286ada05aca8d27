"""Check the quantized linear kernels on a device: the kernel chosen, its error against the dequantized
reference, and its time against the float matmul, at decode (1 row) and prefill (512 rows) shapes. One JSON.

    python -m myolo.kernels.quantization.gpu_check [--out result.json]     # on a CUDA device
    python -m myolo.kernels.quantization.gpu_check --device cpu --small    # a smoke test (the unit tests run it)

Shapes are the ``1b`` preset's (2048 wide, 5632 hidden); ``--small`` uses 256 x 512. The bound: 2 % of the
output's scale in bfloat16, 1e-4 in float32.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F

from myolo.kernels.quantization.grid import Grid, round_to_nearest
from myolo.kernels.quantization.linear import PACKED_MAX_ROWS, QuantLinear

BOUND = {torch.float32: 1e-4, torch.bfloat16: 2e-2}
GRIDS = (
    ("int8 rows", Grid(8, 0, True)),
    ("int4 g32", Grid(4, 32)),
    ("int4 g64", Grid(4, 64)),
    ("int4 g128", Grid(4, 128)),
)


def timed(fn: Callable[[], object], device: torch.device, reps: int) -> float:
    """Milliseconds per call, after one warm-up call."""
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    began = time.perf_counter()
    for _ in range(reps):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - began) * 1e3 / reps


def check(
    device: torch.device, dtype: torch.dtype, shapes: list[tuple[int, int]], rows: tuple[int, ...], reps: int
) -> list[dict]:
    out = []
    gen = torch.Generator().manual_seed(0)
    for n, k in shapes:
        w = torch.randn(n, k, generator=gen) * 0.02
        for label, grid in GRIDS:
            lin = QuantLinear.of(round_to_nearest(w, grid)).to(device)
            ref_w = lin.dequantized().to(device)
            for m in rows:
                x = torch.randn(m, k, generator=gen).to(device=device, dtype=dtype)
                got = lin(x).float()
                ref = x.float() @ ref_w.T
                err = float((got - ref).abs().max() / ref.abs().max().clamp_min(1e-12))
                wf = ref_w.to(dtype)
                out.append({
                    "shape": [n, k], "grid": label, "rows": m, "dtype": str(dtype).removeprefix("torch."),
                    "kernel": lin.kernel(device, dtype) if m <= PACKED_MAX_ROWS else f"dequant (rows > {PACKED_MAX_ROWS})",
                    "rel_error": err, "ok": err <= BOUND[dtype],
                    "ms": timed(partial(lin, x), device, reps), "float_ms": timed(partial(F.linear, x, wf), device, reps),
                })  # fmt: skip
                out[-1]["x_float"] = out[-1]["float_ms"] / out[-1]["ms"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--out")
    opts = parser.parse_args(argv)
    device = torch.device(opts.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device: run with --device cpu --small for the smoke test"}))
        return 2
    shapes = [(256, 512)] if opts.small else [(2048, 2048), (5632, 2048), (2048, 5632)]
    rows = (1, 16) if opts.small else (1, 512)
    dtypes = [torch.float32] if device.type == "cpu" else [torch.bfloat16]
    results = [r for dt in dtypes for r in check(device, dt, shapes, rows, 3 if opts.small else 50)]
    report = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "ok": all(r["ok"] for r in results),
        "results": results,
    }
    text = json.dumps(report, indent=2)
    if opts.out:
        with open(opts.out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
