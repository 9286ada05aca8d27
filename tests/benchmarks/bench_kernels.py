"""Per-op, per-backend CPU timings of myolo.kernels.ops -> tests/benchmarks/results/kernels_cpu.json.

Shapes are those of the `small` preset (hidden 768, 12 heads of 64, vocab 32000) at 1024 tokens per step,
so the figures say what each backend costs the trainer per call; a last section times whole `small`-preset
training steps (tokens/s) with the default CPU backends and with every op on the reference. Backends take
turns sample by sample and the min and median are reported; speedup_vs_reference = reference min time /
backend min time (> 1 is faster). Backends not usable on CPU
(apex: CUDA only; triton: CUDA, or an interpreter that is for tests only) are listed with the reason.
Run: .venv/bin/python tests/benchmarks/bench_kernels.py [--out PATH] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from myolo.kernels import ops  # noqa: E402
from myolo.kernels.ops import registry  # noqa: E402
from myolo.kernels.ops.autotune import attention as autotune  # noqa: E402

TOKENS, HIDDEN, HEADS, HEAD_DIM, VOCAB, BATCH = 1024, 768, 12, 64, 32000, 4
SEQ = TOKENS // BATCH
ADAMW_PARAMS = [(HIDDEN, 3 * HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, 4 * HIDDEN), (4 * HIDDEN, HIDDEN), (HIDDEN,)] * 2


def timed_interleaved(
    fns: dict[str, Callable[[], object]], budget_s: float = 1.5, min_rounds: int = 3, max_rounds: int = 30
) -> dict[str, dict[str, float]]:
    """Per name: min and median ms of fn(), the fns taking turns sample by sample.

    Why interleave and take the min: this machine is shared, and load that comes and goes would otherwise
    land on whichever backend was being timed then. Taking turns exposes all to the same load; the min is
    the least-disturbed sample, the closest to what the kernel itself costs.
    """
    for fn in fns.values():
        fn()  # warm-up
    samples: dict[str, list[float]] = {n: [] for n in fns}
    start = time.perf_counter()
    rounds = 0
    while rounds < max_rounds and (rounds < min_rounds or time.perf_counter() - start < budget_s):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append((time.perf_counter() - t0) * 1e3)
        rounds += 1
    return {
        n: {"min_ms": round(min(v), 4), "median_ms": round(statistics.median(v), 4), "samples": len(v)}
        for n, v in samples.items()
    }


def _inputs(op: str, dtype: torch.dtype) -> tuple[tuple, Callable[[object], torch.Tensor]]:
    """(args, how to reduce the output to a scalar for backward) for one op; leaves require grad."""
    g = torch.Generator().manual_seed(0)

    def leaf(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_(True)

    if op == "rms_norm":
        return (leaf(TOKENS, HIDDEN), leaf(HIDDEN), 1e-5), lambda y: y.sum()
    if op == "residual_rms_norm":
        return (leaf(TOKENS, HIDDEN), leaf(TOKENS, HIDDEN), leaf(HIDDEN), 1e-5), lambda y: y[0].sum() + y[1].sum()
    if op == "layer_norm":
        return (leaf(TOKENS, HIDDEN), leaf(HIDDEN), leaf(HIDDEN), 1e-5), lambda y: y.sum()
    if op == "cross_entropy":
        return (leaf(TOKENS, VOCAB), torch.randint(0, VOCAB, (TOKENS,), generator=g), -100), lambda y: y
    if op == "attention":
        qkv = [leaf(BATCH, HEADS, SEQ, HEAD_DIM) for _ in range(3)]
        return (*qkv, True), lambda y: y.sum()
    raise AssertionError(op)


def op_callables(op: str, impl: Callable, dtype: torch.dtype) -> dict[str, Callable[[], None]]:
    """{"forward": ..., "forward_backward": ...} closures over fresh seeded inputs for one backend."""
    args, scalar = _inputs(op, dtype)
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]

    def forward() -> None:
        with torch.no_grad():
            impl(*args)

    def forward_backward() -> None:
        for t in leaves:
            t.grad = None
        scalar(impl(*args)).backward()

    return {"forward": forward, "forward_backward": forward_backward}


def adamw_callable(make: Callable, dtype: torch.dtype) -> Callable[[], None]:
    g = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(*s, generator=g, dtype=dtype)) for s in ADAMW_PARAMS]
    for p in params:
        p.grad = torch.randn(p.shape, generator=g, dtype=dtype)
    return make(params, 1e-4, (0.9, 0.95), 1e-8, 0.1).step


def _speedups(results: dict[str, dict]) -> None:
    """speedup_vs_reference per phase, from the min times (see timed_interleaved)."""
    ref = results.get("reference", {})
    for r in results.values():
        for phase, t in r.items():
            if isinstance(t, dict) and phase in ref:
                t["speedup_vs_reference"] = round(ref[phase]["min_ms"] / t["min_ms"], 3)


def _pinned_sdpa(backend) -> Callable:
    def run(q, k, v, causal):
        with torch.nn.attention.sdpa_kernel([backend]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return run


def run(dtype: torch.dtype) -> dict:
    out: dict[str, dict] = {}
    for op in ops.OPS:
        avail = ops.availability(op, "cpu", dtype)
        impls = {n: registry.backends()[n].impls[op] for n, why in avail.items() if why == "available"}
        if op == "attention":  # each SDPA backend pinned, next to the autotuned choice ("native")
            for sdpa_name, backend in autotune.CANDIDATES.items():
                try:
                    op_callables(op, _pinned_sdpa(backend), dtype)["forward"]()
                    impls[f"native[{sdpa_name}]"] = _pinned_sdpa(backend)
                except RuntimeError as e:
                    avail[f"native[{sdpa_name}]"] = str(e).splitlines()[0][:160]
        results: dict[str, dict] = {name: {} for name in impls}
        if op == "adamw":
            for name, t in timed_interleaved({n: adamw_callable(f, dtype) for n, f in impls.items()}).items():
                results[name]["step"] = t
        else:
            calls = {n: op_callables(op, f, dtype) for n, f in impls.items()}
            for phase in ("forward", "forward_backward"):
                for name, t in timed_interleaved({n: c[phase] for n, c in calls.items()}).items():
                    results[name][phase] = t
        if op == "attention":
            results["native"]["autotuned_choice"] = next(iter(autotune.attention_autotuner().cached_choices().values()))
        _speedups(results)
        out[op] = {"backends": results, "unavailable": {n: why for n, why in avail.items() if why != "available"}}
    return out


MODEL_TOKENS = 256  # one sequence per step: the small preset's step is seconds on one CPU thread


def bench_model(prefers: dict[str, dict | None], steps: int = 3) -> dict:
    """Tokens/s of a `small`-preset training step (forward, backward, AdamW) per backend configuration.

    The configurations take turns step by step (each with its own optimizer) for the reason given in
    timed_interleaved; tokens/s uses the fastest step of each.
    """
    try:
        from myolo.kernels.model.config import preset
        from myolo.kernels.model.gpt import GPT
    except ImportError as e:  # the model lives in kernels/model (trainer core); report, do not crash
        return {"error": f"myolo.kernels.model unavailable: {e}"}
    torch.manual_seed(0)
    model = GPT(preset("small"))
    tokens = torch.randint(0, model.cfg.vocab_size, (1, MODEL_TOKENS + 1))
    optimizers, selected = {}, {}
    for label, prefer in prefers.items():
        selected[label] = ops.configure(prefer=prefer)
        optimizers[label] = ops.make_adamw(model.parameters(), 1e-4, (0.9, 0.95), 1e-8, 0.1)
    times: dict[str, dict[str, list[float]]] = {n: {"forward_backward": [], "optimizer": []} for n in prefers}
    for i in range(steps + 1):  # the first round warms up (and autotunes attention)
        for label, prefer in prefers.items():
            ops.configure(prefer=prefer)
            t0 = time.perf_counter()
            logits = model(tokens[:, :-1])
            ops.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten()).backward()
            t1 = time.perf_counter()
            optimizers[label].step()
            optimizers[label].zero_grad(set_to_none=True)
            if i:
                times[label]["forward_backward"].append(t1 - t0)
                times[label]["optimizer"].append(time.perf_counter() - t1)
    out = {}
    for label, t in times.items():
        best = min(a + b for a, b in zip(t["forward_backward"], t["optimizer"], strict=True))
        out[label] = {
            "selected": selected[label],
            "forward_backward_min_s": round(min(t["forward_backward"]), 3),
            "optimizer_min_s": round(min(t["optimizer"]), 3),
            "tokens_per_s": round(MODEL_TOKENS / best, 1),
        }
    ref = out.get("reference", {}).get("tokens_per_s")
    for r in out.values():
        if ref:
            r["speedup_vs_reference"] = round(r["tokens_per_s"] / ref, 3)
    return {"preset": "small", "tokens_per_step": MODEL_TOKENS, "steps_timed": steps, "configs": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "tests/benchmarks/results/kernels_cpu.json"))
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: steady on a shared machine)")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--no-model", action="store_true", help="skip the small-preset step per backend")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    os.environ.setdefault(  # a fresh autotune cache: every backend measured in this run
        "MYOLO_AUTOTUNE_CACHE", os.path.join(tempfile.mkdtemp(prefix="myolo-bench-"), "attention_autotune.json")
    )
    started = time.perf_counter()
    dtype = getattr(torch, args.dtype)
    report = {
        "benchmark": "kernels_cpu",
        "created_unix": int(time.time()),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "torch": torch.__version__,
            "threads": args.threads,
        },
        "dtype": args.dtype,
        "shapes": {
            "tokens": TOKENS,
            "hidden": HIDDEN,
            "heads": HEADS,
            "head_dim": HEAD_DIM,
            "vocab": VOCAB,
            "batch": BATCH,
            "seq": SEQ,
        },
        "ops": run(dtype),
    }
    if not args.no_model and dtype == torch.float32:
        # "native": the default registry order on CPU; "reference": every op on the plain-math backend.
        report["model"] = bench_model({"native": None, "reference": {"*": ["reference"]}})
    report["runtime_s"] = round(time.perf_counter() - started, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    for op, d in report["ops"].items():
        for b, r in d["backends"].items():
            cells = [
                f"{p} {t['min_ms']:.3f} ms (x{t['speedup_vs_reference']})" for p, t in r.items() if isinstance(t, dict)
            ]
            print(f"{op:18} {b:28} " + "  ".join(cells))
    if "model" in report:
        print(json.dumps(report["model"], indent=1))
    print(f"wrote {args.out} in {report['runtime_s']} s", file=sys.stderr)


if __name__ == "__main__":
    main()
