"""GPU check of every op backend: numerics against the reference and speed, printed as one JSON object.

For a session that has a CUDA device (written on a CPU-only machine, so never run there on a GPU):
    python -m myolo.kernels.ops.gpu_check [--dtype bfloat16 --dtype float32] [--out result.json]
It reports which backends are usable on the device (apex needs its compiled extensions, triton needs CUDA),
the max relative error of outputs and gradients against the fp32-accumulating reference (with pass/fail at
the per-dtype tolerance), forward and forward+backward time per call, speedup vs reference, each SDPA
backend pinned, and the attention autotune choice for the 1b preset's shape. `--device cpu --small` runs the
same code on tiny shapes as a smoke test (the unit tests do that).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

import torch

from myolo.kernels import ops
from myolo.kernels.ops import registry
from myolo.kernels.ops.autotune import attention as autotune

TOLERANCE = {torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}
# (tokens, hidden, vocab, batch, heads, seq, head_dim): the 1b preset's activations at 8k tokens per GPU.
BIG = (8192, 2048, 32000, 4, 16, 2048, 128)
SMALL = (64, 96, 203, 2, 3, 32, 16)


def _timer(device: torch.device) -> Callable[[Callable[[], object], int], float]:
    def cuda_ms(fn: Callable[[], object], reps: int) -> float:
        fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize(device)
        return start.elapsed_time(end) / reps

    def cpu_ms(fn: Callable[[], object], reps: int) -> float:
        fn()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - t0) * 1e3 / reps

    return cuda_ms if device.type == "cuda" else cpu_ms


def _make_inputs(op: str, shape: tuple, device: torch.device, dtype: torch.dtype, seed: int = 0):
    tokens, hidden, vocab, b, h, s, d = shape
    g = torch.Generator(device=device).manual_seed(seed)

    def leaf(*dims: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(*dims, generator=g, device=device) * scale).to(dtype).requires_grad_(True)

    if op == "rms_norm":
        return [leaf(tokens, hidden), leaf(hidden), 1e-5]
    if op == "residual_rms_norm":
        return [leaf(tokens, hidden), leaf(tokens, hidden), leaf(hidden), 1e-5]
    if op == "layer_norm":
        return [leaf(tokens, hidden), leaf(hidden), leaf(hidden, scale=0.1), 1e-5]
    if op == "cross_entropy":
        targets = torch.randint(0, vocab, (tokens,), generator=g, device=device)
        targets[::7] = -100
        return [leaf(tokens, vocab, scale=3.0), targets, -100]
    if op == "attention":
        return [leaf(b, h, s, d), leaf(b, h, s, d), leaf(b, h, s, d), True]
    raise AssertionError(op)


def _scalar(out) -> torch.Tensor:
    outs = out if isinstance(out, tuple) else (out,)
    return sum(o.float().sum() for o in outs)


def _outputs_and_grads(impl: Callable, args: list) -> list[torch.Tensor]:
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    for t in leaves:
        t.grad = None
    out = impl(*args)
    _scalar(out).backward()
    outs = list(out) if isinstance(out, tuple) else [out]
    return [o.detach() for o in outs] + [t.grad for t in leaves]


def _max_rel_error(got: list[torch.Tensor], want: list[torch.Tensor]) -> float:
    worst = 0.0
    for a, e in zip(got, want, strict=True):
        scale = max(e.float().abs().max().item(), 1e-6)
        worst = max(worst, (a.float() - e.float()).abs().max().item() / scale)
    return worst


def check_op(
    op: str, impls: dict[str, Callable], shape: tuple, device: torch.device, dtype: torch.dtype, reps: int
) -> dict:
    timer = _timer(device)
    args = _make_inputs(op, shape, device, dtype)
    want = _outputs_and_grads(impls["reference"], args)
    result = {}
    for name, impl in impls.items():
        try:
            err = _max_rel_error(_outputs_and_grads(impl, args), want)
            leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]

            def fwd(impl=impl):
                with torch.no_grad():
                    impl(*args)

            def fwd_bwd(impl=impl, leaves=leaves):
                for t in leaves:
                    t.grad = None
                _scalar(impl(*args)).backward()

            result[name] = {
                "max_rel_error": err,
                "numerics_ok": err <= TOLERANCE[dtype],
                "forward_ms": round(timer(fwd, reps), 4),
                "forward_backward_ms": round(timer(fwd_bwd, reps), 4),
            }
        except Exception as e:  # report and go on: one broken backend must not hide the others
            result[name] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    ref = result.get("reference", {})
    for r in result.values():
        for f in ("forward_ms", "forward_backward_ms"):
            if f in r and f in ref:
                r[f"speedup_vs_reference_{f.removesuffix('_ms')}"] = round(ref[f] / r[f], 3)
    return result


def check_adamw(impls: dict[str, Callable], n_params: int, device: torch.device, dtype: torch.dtype, reps: int) -> dict:
    timer = _timer(device)
    g = torch.Generator(device=device).manual_seed(0)
    # Small weights and lr 1e-2: the update then exceeds the weights' rounding step even in bf16, so the
    # comparison of updates measures the optimizer, not rounding noise.
    start = (torch.randn(n_params, generator=g, device=device) * 0.01).to(dtype)
    grads = [torch.randn(n_params, generator=g, device=device).to(dtype) for _ in range(3)]

    def three_steps(make):
        p = torch.nn.Parameter(start.clone())
        opt = make([p], 1e-2, (0.9, 0.95), 1e-8, 0.1)
        for gr in grads:
            p.grad = gr
            opt.step()
        return p.detach(), opt

    want, _ = three_steps(impls["reference"])
    result = {}
    for name, make in impls.items():
        try:
            got, opt = three_steps(make)
            err = _max_rel_error([got - start], [want - start])  # compare the updates, not the weights
            result[name] = {
                "max_rel_error": err,
                "numerics_ok": err <= max(TOLERANCE[dtype], 1e-4),
                "step_ms": round(timer(opt.step, reps), 4),
            }
        except Exception as e:
            result[name] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    ref = result.get("reference", {})
    for r in result.values():
        if "step_ms" in r and "step_ms" in ref:
            r["speedup_vs_reference_step"] = round(ref["step_ms"] / r["step_ms"], 3)
    return result


def _pinned_sdpa(backend) -> Callable:
    def run(q, k, v, causal):
        with torch.nn.attention.sdpa_kernel([backend]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return run


def _all_results(report: dict):
    for per_op in report["dtypes"].values():
        for value in per_op.values():
            if isinstance(value, dict) and "backends" in value:
                yield from value["backends"].items()


def _backend_ok(name: str, result: dict) -> bool:
    if "error" in result:
        # A pinned SDPA backend may refuse a shape/dtype on purpose; any registry backend must not fail.
        return name.startswith("native[")
    return result["numerics_ok"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="numerics and speed of each myolo.kernels.ops backend vs reference")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", action="append", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--small", action="store_true", help="tiny shapes (smoke test)")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device: run this on a GPU machine (or --device cpu --small)"}))
        return 2
    shape = SMALL if args.small else BIG
    report: dict = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "apex": registry.backends()["apex"].unavailable("adamw", device, torch.float32) or "available",
        "shape": dict(zip(("tokens", "hidden", "vocab", "batch", "heads", "seq", "head_dim"), shape, strict=True)),
        "dtypes": {},
    }
    for dtype_name in args.dtype or ["bfloat16", "float32"]:
        dtype = getattr(torch, dtype_name)
        per_op = {}
        for op in ops.OPS:
            avail = ops.availability(op, device, dtype)
            impls = {n: registry.backends()[n].impls[op] for n, why in avail.items() if why == "available"}
            if op == "adamw":
                res = check_adamw(impls, 4096 if args.small else 100_000_000, device, dtype, args.reps)
            else:
                if op == "attention":
                    for name, backend in autotune.CANDIDATES.items():
                        impls[f"native[{name}]"] = _pinned_sdpa(backend)
                res = check_op(op, impls, shape, device, dtype, args.reps)
            per_op[op] = {"backends": res, "unavailable": {n: w for n, w in avail.items() if w != "available"}}
        per_op["selected"] = ops.configure(device=device, dtype=dtype)
        per_op["attention_autotune"] = autotune.attention_autotuner().cached_choices()
        report["dtypes"][dtype_name] = per_op
    report["all_numerics_ok"] = all(_backend_ok(name, r) for name, r in _all_results(report))
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0 if report["all_numerics_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
