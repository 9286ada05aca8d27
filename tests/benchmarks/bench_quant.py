"""Post-training quantization, side by side with the float model in one run -> results/quant.json.

Quality and speed are measured apart, honestly (docs/quantization.md):
- quality on a byte-level GPT trained here on Python's standard library sources (``quant_corpus``; trained once
  by this benchmark with ``myolo-train`` and cached, a shape that learns within about an hour on 2 cores):
  held-out perplexity of each variant and its change against fp32, on the same tokens, never the calibration's;
- speed on ``small`` (random weights: values do not change the speed), and on ``1b`` for one variant per
  kernel: bytes on disk, bits per weight of the quantized layers (scales and zeros included), prefill and
  batch-1 decode tokens/s (fixed threads, a warm-up, the median of ``--runs``), eager.
Variants: fp32, bf16, int8 weight-only (rtn, per row), int4 rtn g128, gptq g64 and g128, hqq g64, dynamic
fixed point at 8 and 4 bits (and rtn g64, the group size GPTQ is judged against). ``--device cuda`` runs the speed part on a GPU.
Run: python -m tests.benchmarks quant [--quick] (or python tests/benchmarks/bench_quant.py --help)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from myolo.events.payloads.trainer_values import parse_model_args  # noqa: E402
from myolo.kernels.export.evaluate import evaluate  # noqa: E402
from myolo.kernels.infer.generate import generate  # noqa: E402
from myolo.kernels.infer.load import load_model  # noqa: E402
from myolo.kernels.model import GPT, preset  # noqa: E402
from myolo.kernels.quantization import PTQConverter, save_quantized  # noqa: E402
from myolo.kernels.quantization.calibrate import calibration_set  # noqa: E402
from myolo.kernels.quantization.linear import QuantLinear  # noqa: E402
from myolo.kernels.quantization.overlap import file_prefix, shared_runs  # noqa: E402
from tests.benchmarks import quant_corpus  # noqa: E402
from tests.benchmarks.common import write_result  # noqa: E402

CACHE = Path(os.environ.get("MYOLO_CACHE_DIR", Path.home() / ".cache" / "myolo")) / "bench" / "quant"
# the quality model: byte-level, 6 x 256 wide, ~5 M parameters; its ffn width divides by 32..256 for every group
TEXT_MODEL = ["dim=256", "n_layers=6", "n_heads=8", "ffn_hidden=768", "max_seq_len=256"]
TEXT_STEPS, TEXT_BATCH, SEQ = 3000, 16, 256


@dataclass(frozen=True)
class Variant:
    name: str
    scheme: str | None = None  # None: float
    bits: int = 0
    group: int | None = None
    dtype: torch.dtype = torch.float32


VARIANTS = (
    Variant("fp32"),
    Variant("bf16", dtype=torch.bfloat16),
    Variant("int8 weight-only (rtn, per row)", "rtn", 8),
    Variant("int4 rtn g64", "rtn", 4, 64),
    Variant("int4 rtn g128", "rtn", 4, 128),
    Variant("int4 gptq g64", "gptq", 4, 64),
    Variant("int4 gptq g128", "gptq", 4, 128),
    Variant("int4 hqq g64", "hqq", 4, 64),
    Variant("dynamic fixed point 8", "dynamic_fixed_point", 8),
    Variant("dynamic fixed point 4", "dynamic_fixed_point", 4),
)
# the big speed table: one variant per kernel and layout (speed depends on those, not on how codes were chosen:
# gptq and hqq give the int4 kernel the same tensors as rtn at their group size)
BIG_VARIANTS = tuple(
    v for v in VARIANTS if v.name in ("fp32", "bf16", "int8 weight-only (rtn, per row)", "int4 rtn g64",
                                      "int4 rtn g128", "dynamic fixed point 4")
)  # fmt: skip


def quantized(model: GPT, v: Variant, calib, name: str, args: dict) -> GPT:
    if v.scheme is None:
        return model.to(v.dtype)
    conv = PTQConverter(
        model=model, calib_dataset=calib, bit_width=v.bits, scheme=v.scheme, group_size=v.group,
        model_name=name, model_args=args,
    )  # fmt: skip
    out = conv.convert()
    out.spec = conv.spec  # type: ignore[attr-defined]
    return out


def on_disk(model: GPT, tmp: Path, v: Variant) -> dict[str, float]:
    """File bytes, the quantized layers' bits per weight, their bytes against the same layers in bf16."""
    path = tmp / "m.safetensors"
    if v.scheme is None:
        from myolo.kernels.export.weights import write_weights

        write_weights(model.state_dict(), path, {"format": "pt"})
        linear = [m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and n.startswith("layers.")]
        weights = sum(m.weight.numel() for m in linear)
        size = sum(m.weight.numel() * m.weight.element_size() for m in linear)
    else:
        save_quantized(model, model.spec, path)  # type: ignore[attr-defined]
        linear = [m for m in model.modules() if isinstance(m, QuantLinear)]
        weights = sum(m.in_features * m.out_features for m in linear)
        size = sum(m.weight().bytes() for m in linear)
    return {
        "file_bytes": path.stat().st_size,
        "linear_bits_per_weight": 8 * size / weights,
        "linear_x_smaller_than_bf16": 2 * weights / size,
    }


def speed(model: GPT, cfg, device: str, prompt: int, new: int, runs: int) -> dict[str, float]:
    ids = torch.randint(0, cfg.vocab_size, (1, prompt), generator=torch.Generator().manual_seed(0))
    generate(model, cfg, ids.to(device), 4)  # warm-up: kernels prepared, caches allocated
    outs = [generate(model, cfg, ids.to(device), new) for _ in range(runs)]
    return {
        "prefill_tokens_per_s": statistics.median(o.prefill_tokens_per_s for o in outs),
        "decode_tokens_per_s": statistics.median(o.decode_tokens_per_s for o in outs),
    }


def text_model(corpus: quant_corpus.Corpus, steps: int, quick: bool) -> Path:
    """The trained quality model's export, trained here once (resumable) and cached."""
    work = CACHE / ("text-quick" if quick else "text")
    export = work / "model.safetensors"
    if export.exists():
        return export
    cmd = [
        sys.executable, "-m", "myolo.kernels.cli.launch", "--nproc", "1", "--model", "tiny",
        *[a for arg in TEXT_MODEL for a in ("--model-arg", arg)],
        "--steps", str(steps), "--global-batch", str(TEXT_BATCH), "--seq-len", str(SEQ), "--lr", "2e-3",
        "--warmup-steps", str(min(100, steps // 10)), "--data", str(corpus.train), "--device", "cpu",
        "--checkpoint-dir", str(work / "ckpt"), "--checkpoint-every", "100", "--resume",
        "--export-path", str(export), "--eval-data", str(corpus.eval), "--eval-batches", "8",
    ]  # fmt: skip
    print(f"training the quality model ({steps} steps; resumable): {' '.join(cmd)}", flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)
    return export


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny shapes and few steps: checks the benchmark runs")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--new", type=int, default=32)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--speed-model", default="small")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument(
        "--big-model", default="1b", help="a second speed table on this preset, kernels apart only ('none': skip)"
    )
    parser.add_argument("--big-runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=TEXT_STEPS, help="training steps of the quality model")
    parser.add_argument("--eval-batches", type=int, default=16)
    opts = parser.parse_args()
    torch.set_num_threads(opts.threads)
    torch.manual_seed(0)
    rows: dict[str, dict] = {v.name: {} for v in VARIANTS}
    result: dict = {"threads": opts.threads, "runs": opts.runs, "device": opts.device}
    corpus = quant_corpus.build(CACHE / "corpus")
    result["corpus"] = {"sha256": corpus.sha256, "files": corpus.files}

    if not opts.skip_quality:
        export = text_model(corpus, 20 if opts.quick else opts.steps, opts.quick)
        base, cfg = load_model(export)
        calib = calibration_set(corpus.calib, vocab_size=cfg.vocab_size, max_seq_len=cfg.max_seq_len, seq_len=SEQ)
        eval_tokens = opts.eval_batches * 8 * (SEQ + 1)
        hits, total = shared_runs(
            [file_prefix(corpus.calib, calib.sequences * (SEQ + 1))], [file_prefix(corpus.eval, eval_tokens)]
        )
        result["quality"] = {
            "model": {
                "preset": "tiny",
                "args": TEXT_MODEL,
                "export": str(export),
                "manifest": json.loads(Path(f"{export}.json").read_text()),
            },
            "calib_tokens": calib.tokens,
            "eval_tokens": opts.eval_batches * 8 * SEQ,
            "calib_eval_shared_runs_of_32": [hits, total],
        }
        for v in VARIANTS:
            model, _ = load_model(export)
            q = quantized(model, v, calib, "tiny", parse_model_args(TEXT_MODEL))
            ev = evaluate(q, corpus.eval, seq_len=SEQ, rows=8, batches=opts.eval_batches, vocab_size=cfg.vocab_size)
            rows[v.name]["perplexity"] = ev.perplexity
            print(f"quality {v.name}: perplexity {ev.perplexity:.4f}", flush=True)
        ref = rows["fp32"]["perplexity"]
        for r in rows.values():
            r["perplexity_change_pct"] = 100 * (r["perplexity"] / ref - 1)
        del base

    name = "tiny" if opts.quick else opts.speed_model
    args = parse_model_args(TEXT_MODEL) if opts.quick else {}  # tiny's own width fits no group of 128
    speed_table(name, VARIANTS, rows, opts.device, opts.prompt, opts.new, opts.runs, args)
    result["speed_model"] = name
    result["variants"] = rows
    if opts.big_model != "none" and not opts.quick:
        big = {v.name: {} for v in BIG_VARIANTS}
        speed_table(opts.big_model, BIG_VARIANTS, big, opts.device, opts.prompt, opts.new, opts.big_runs)
        result["big"] = {"model": opts.big_model, "runs": opts.big_runs, "variants": big}
    result["goals"] = goals(rows)
    write_result("quant" if not opts.quick else "quant_quick", result)


def speed_table(
    name: str,
    variants: tuple[Variant, ...],
    rows: dict[str, dict],
    device: str,
    prompt: int,
    new: int,
    runs: int,
    args: dict | None = None,
) -> None:
    """Size and speed of each variant of ``name`` (random weights) into ``rows``, with ratios to fp32."""
    cfg = preset(name, **(args or {}))
    calib_ids = torch.randint(0, cfg.vocab_size, (16, 128), generator=torch.Generator().manual_seed(1))
    with tempfile.TemporaryDirectory() as tmp:
        for v in variants:
            torch.manual_seed(0)
            began = time.perf_counter()
            q = quantized(GPT(cfg).eval().to(device), v, calib_ids, name, args or {})  # quantized where it runs
            took = time.perf_counter() - began
            rows[v.name].update(on_disk(q, Path(tmp), v))
            q = q.to(device)
            rows[v.name].update(speed(q, cfg, device, prompt, new, runs))
            rows[v.name]["quantize_s"] = took
            print(f"speed {name} {v.name}: {rows[v.name]}", flush=True)
            del q
    fp32 = rows["fp32"]
    for r in rows.values():
        r["decode_x_fp32"] = r["decode_tokens_per_s"] / fp32["decode_tokens_per_s"]
        r["prefill_x_fp32"] = r["prefill_tokens_per_s"] / fp32["prefill_tokens_per_s"]


def goals(rows: dict[str, dict]) -> dict[str, dict]:
    """The issue's goals, each met or missed and by how much."""

    def goal(value: float | None, target: float, better: str) -> dict:
        if value is None:
            return {"value": None, "target": target, "met": None}
        met = value <= target if better == "below" else value >= target
        return {"value": value, "target": target, "met": met}

    i8, g64, rtn64 = rows["int8 weight-only (rtn, per row)"], rows["int4 gptq g64"], rows["int4 rtn g64"]
    return {
        "int8 perplexity change % <= 0.5": goal(i8.get("perplexity_change_pct"), 0.5, "below"),
        "int8 decode x fp32 >= 1.5": goal(i8["decode_x_fp32"], 1.5, "above"),
        "gptq g64 perplexity change % <= 5": goal(g64.get("perplexity_change_pct"), 5.0, "below"),
        "gptq g64 perplexity minus rtn g64's < 0": goal(
            g64["perplexity"] - rtn64["perplexity"] if "perplexity" in g64 else None, 0.0, "below"
        ),
        "gptq g64 linear weights x smaller than bf16 >= 3.5": goal(g64["linear_x_smaller_than_bf16"], 3.5, "above"),
        "gptq g64 decode x fp32 >= 2": goal(g64["decode_x_fp32"], 2.0, "above"),
    }


if __name__ == "__main__":
    main()
