"""The watermark's null, its robustness and its cost, on the byte-level text model -> results/watermark.json.

The model is the quantization benchmark's quality model (trained once on Python's standard library sources
and cached). It is marked with a fixed benchmark key by ``DigitalWatermark.apply`` (``--embed-steps`` on the
training split) and, beside it, fine-tuned the same way without the mark (the control: what the fine-tune
alone does to perplexity). Then:
- the null: the marked model under ``--wrong-keys`` other keys, and the true key on unmarked models (the
  source, the control, ``--random-models`` freshly initialised ones): matched bits against Binomial(256, 1/2)
  (a KS test of the counts' randomized probability integral transform), and the false-positive rate at the
  decision threshold with its Wilson interval;
- attacks, each followed by a check: int8 RTN, int4 RTN g128, GPTQ 4-bit g128, fine-tuning for 10 % more steps
  than the model's training on other data (the calibration split) at two learning rates, int4 g128 after that
  fine-tune, magnitude pruning of every block's linear weights at 20/40/50/60 %, Gaussian weight noise at 10 %
  and 30 % of each tensor's spread, and a permutation of the residual dimensions and of every block's
  feed-forward units (read without and with the owner's reference weights);
- the cost: held-out perplexity of the marked model against the source and against the control.
Run: python -m tests.benchmarks watermark [--quick]
"""

from __future__ import annotations

import argparse
import copy
import functools
import hashlib
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from scipy import stats as scipy_stats

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from myolo.kernels.data.tokenfile import TokenFile  # noqa: E402
from myolo.kernels.export.evaluate import evaluate  # noqa: E402
from myolo.kernels.infer.load import load_model  # noqa: E402
from myolo.kernels.model import GPT  # noqa: E402
from myolo.kernels.quantization import PTQConverter  # noqa: E402
from myolo.kernels.quantization.calibrate import calibration_set  # noqa: E402
from myolo.kernels.watermark import DigitalWatermark  # noqa: E402
from myolo.kernels.watermark import stats as wm_stats  # noqa: E402
from myolo.kernels.watermark.mark import Verification  # noqa: E402
from tests.benchmarks import quant_corpus  # noqa: E402
from tests.benchmarks.bench_quant import CACHE, SEQ, TEXT_BATCH, TEXT_STEPS, text_model  # noqa: E402
from tests.benchmarks.common import wilson, write_result  # noqa: E402

KEY = hashlib.sha256(b"myolo watermark benchmark key").digest()
Batches = Iterator[tuple[torch.Tensor, torch.Tensor]]


def batches(path: Path, seed: int) -> Batches:
    tokens = TokenFile(path, TEXT_BATCH, SEQ, seed=seed, vocab_size=256)
    step = 0
    while True:
        yield tokens.global_batch(step)
        step += 1


def finetune(model: GPT, feed: Batches, steps: int, lr: float) -> GPT:
    """Plain AdamW on the task loss, in place: the control, and the fine-tuning attack."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    for _ in range(steps):
        x, y = next(feed)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def blocks_linears(model: GPT) -> list[torch.nn.Linear]:
    return [m for name, m in model.named_modules() if name.startswith("layers.") and isinstance(m, torch.nn.Linear)]


@torch.no_grad()
def prune(model: GPT, share: float) -> GPT:
    """Zero the ``share`` of smallest-magnitude weights of every linear layer of the blocks."""
    for lin in blocks_linears(model):
        w = lin.weight
        k = int(share * w.numel())
        if k:
            cut = w.abs().flatten().kthvalue(k).values
            w[w.abs() <= cut] = 0.0
    return model


@torch.no_grad()
def noise(model: GPT, ratio: float, seed: int = 0) -> GPT:
    gen = torch.Generator().manual_seed(seed)
    for lin in blocks_linears(model):
        w = lin.weight
        w.add_(torch.randn(w.shape, generator=gen) * ratio * w.std())
    return model


@torch.no_grad()
def permute(model: GPT, seed: int = 7) -> GPT:
    """A function-preserving permutation of the residual dimensions and of each block's feed-forward units."""
    gen = torch.Generator().manual_seed(seed)
    residual = torch.randperm(model.cfg.dim, generator=gen)
    for name, p in model.named_parameters():
        reads = name.endswith(("wq.weight", "wk.weight", "wv.weight", "w1.weight", "w3.weight"))
        if reads or name in ("output.weight", "tok_embeddings.weight"):
            p.copy_(p[:, residual])
        elif name.endswith(("wo.weight", "w2.weight")) or p.ndim == 1:
            p.copy_(p[residual])
    for block in model.layers.values():
        ff = block.feed_forward
        units = torch.randperm(ff.w1.weight.shape[0], generator=gen)
        ff.w1.weight.copy_(ff.w1.weight[units])
        ff.w3.weight.copy_(ff.w3.weight[units])
        ff.w2.weight.copy_(ff.w2.weight[:, units])
    return model


def verdict(v: Verification) -> dict:
    return {
        "matched": v.matched,
        "bits": v.bits,
        "ber": v.ber,
        "p_value": v.p_value,
        "log10_p": v.log10_p,
        "marked": v.marked,
        **({"realigned_units": sum(v.realigned.values())} if v.realigned else {}),
    }


def null_distribution(marked: GPT, unmarked: list[GPT], mark: DigitalWatermark, wrong_keys: int) -> dict:
    """Matched bits where the null holds: wrong keys on the marked model, the true key on unmarked models."""
    counts = [DigitalWatermark.generate(key=f"wrong key {i}").verify(marked).matched for i in range(wrong_keys)]
    counts += [mark.verify(m).matched for m in unmarked]
    bits = mark.settings.bits
    rng = np.random.default_rng(0)
    pit = [wm_stats.randomized_pit(k, bits, float(rng.uniform())) for k in counts]
    ks = scipy_stats.kstest(pit, "uniform")
    threshold = wm_stats.threshold_bits(bits, mark.settings.alpha)
    false_pos = sum(k >= threshold for k in counts)
    lo, hi = wilson(false_pos, len(counts))
    return {
        "checks": len(counts),
        "wrong_keys": wrong_keys,
        "unmarked_models": len(unmarked),
        "matched_mean": float(np.mean(counts)),
        "matched_sd": float(np.std(counts)),
        "binomial_mean_sd": [bits / 2, (bits / 4) ** 0.5],
        "matched_max": int(max(counts)),
        "ks_uniform_of_randomized_pit": {"statistic": float(ks.statistic), "p_value": float(ks.pvalue)},
        "threshold_bits": threshold,
        "false_positive_rate": {"rate": false_pos / len(counts), "ci95": [lo, hi], "n": len(counts)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a few steps and keys: checks the benchmark runs")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--embed-steps", type=int, default=200)
    parser.add_argument("--embed-lr", type=float, default=1e-4)
    parser.add_argument("--wrong-keys", type=int, default=1000)
    parser.add_argument("--random-models", type=int, default=100)
    parser.add_argument("--eval-batches", type=int, default=16)
    opts = parser.parse_args()
    train_steps = 20 if opts.quick else TEXT_STEPS
    if opts.quick:
        opts.embed_steps, opts.wrong_keys, opts.random_models, opts.eval_batches = 5, 20, 3, 2
    torch.set_num_threads(opts.threads)
    corpus = quant_corpus.build(CACHE / "corpus")
    export = text_model(corpus, train_steps, opts.quick)
    source, cfg = load_model(export)

    def ppl(model: torch.nn.Module) -> float:
        ev = evaluate(model, corpus.eval, seq_len=SEQ, rows=8, batches=opts.eval_batches, vocab_size=256)
        return ev.perplexity

    mark = DigitalWatermark.generate(key=KEY)
    t0 = time.perf_counter()
    marked = copy.deepcopy(source)
    report = mark.apply(marked, batches(corpus.train, seed=11), steps=opts.embed_steps, lr=opts.embed_lr)
    embed_s = time.perf_counter() - t0
    control = finetune(copy.deepcopy(source), batches(corpus.train, seed=11), opts.embed_steps, opts.embed_lr)
    ppl_source, ppl_marked, ppl_control = ppl(source), ppl(marked), ppl(control)
    print(f"perplexity: source {ppl_source:.4f}, control {ppl_control:.4f}, marked {ppl_marked:.4f}", flush=True)

    randoms = []
    for seed in range(opts.random_models):
        torch.manual_seed(1000 + seed)
        randoms.append(GPT(cfg).eval())
    null = null_distribution(marked, [source, control, *randoms], mark, opts.wrong_keys)
    del randoms
    print(f"null: {null}", flush=True)

    calib = calibration_set(corpus.calib, vocab_size=256, max_seq_len=cfg.max_seq_len, seq_len=SEQ)
    tenth = max(1, train_steps // 10)

    def quantized(model: GPT, scheme: str, bits: int, group: int | None) -> torch.nn.Module:
        conv = PTQConverter(model=model, calib_dataset=calib, bit_width=bits, scheme=scheme, group_size=group)
        return conv.convert()

    @functools.cache
    def tuned(lr: float) -> GPT:
        """The marked model fine-tuned at ``lr`` (once: the quantized attack reads the same copy)."""
        return finetune(copy.deepcopy(marked), batches(corpus.calib, seed=23), tenth, lr)

    reference = {n: t.clone() for n, t in marked.state_dict().items()}
    attacks: dict[str, Callable[[], tuple[torch.nn.Module, dict | None]]] = {
        "none": lambda: (marked, None),
        "int8 rtn": lambda: (quantized(marked, "rtn", 8, None), None),
        "int4 rtn g128": lambda: (quantized(marked, "rtn", 4, 128), None),
        "gptq 4-bit g128": lambda: (quantized(marked, "gptq", 4, 128), None),
        "fine-tune 10 % steps, lr 2e-4": lambda: (tuned(2e-4), None),
        "fine-tune 10 % steps, lr 2e-3": lambda: (tuned(2e-3), None),
        "fine-tune 10 % (lr 2e-3) then int4 rtn g128": lambda: (quantized(tuned(2e-3), "rtn", 4, 128), None),
        **{
            f"prune {int(100 * s)} %": (lambda s=s: (prune(copy.deepcopy(marked), s), None))
            for s in (0.2, 0.4, 0.5, 0.6)
        },
        "noise 10 %": lambda: (noise(copy.deepcopy(marked), 0.1), None),
        "noise 30 %": lambda: (noise(copy.deepcopy(marked), 0.3), None),
        "permutation, read without the reference": lambda: (permute(copy.deepcopy(marked)), None),
        "permutation, re-aligned to the reference": lambda: (permute(copy.deepcopy(marked)), reference),
    }
    rows: dict[str, dict] = {}
    for name, attack in attacks.items():
        t0 = time.perf_counter()
        model, ref = attack()
        v = mark.verify(model, ref)
        rows[name] = {**verdict(v), "perplexity": ppl(model), "seconds": time.perf_counter() - t0}
        print(f"{name}: {rows[name]}", flush=True)
        del model

    result = {
        "model": {"export": str(export), "steps": train_steps, "params": sum(p.numel() for p in source.parameters())},
        "settings": {
            "bits": mark.settings.bits,
            "share": mark.settings.share,
            "margin": mark.settings.margin,
            "alpha": mark.settings.alpha,
            "carrier_weights": mark.plan_for(marked).coords,
        },
        "embedding": {
            "steps": report.steps,
            "lr": opts.embed_lr,
            "seconds": embed_s,
            "bits_at_margin": report.bits_at_margin,
            "min_margin": report.min_margin,
        },
        "perplexity": {
            "source": ppl_source,
            "control_finetune": ppl_control,
            "marked": ppl_marked,
            "cost_vs_source_pct": 100 * (ppl_marked / ppl_source - 1),
            "cost_vs_control_pct": 100 * (ppl_marked / ppl_control - 1),
        },
        "null": null,
        "attacks": rows,
        "goals": goals(rows, null, ppl_marked / ppl_source - 1),
    }
    write_result("watermark_quick" if opts.quick else "watermark", result)


def goals(rows: dict[str, dict], null: dict, cost: float) -> dict[str, dict]:
    def below(value: float, target: float) -> dict:
        return {"value": value, "target": target, "met": value < target}

    return {
        "p < 1e-9 after the 10 % fine-tune then int4 g128": below(
            rows["fine-tune 10 % (lr 2e-3) then int4 rtn g128"]["p_value"], 1e-9
        ),
        "p < 1e-6 after 50 % pruning": below(rows["prune 50 %"]["p_value"], 1e-6),
        "perplexity cost <= 0.5 %": {"value": 100 * cost, "target": 0.5, "met": 100 * cost <= 0.5},
        "false positives <= 0.1 % at the threshold": {
            "value": null["false_positive_rate"]["rate"],
            "target": 0.001,
            "met": null["false_positive_rate"]["rate"] <= 0.001,
        },
    }


if __name__ == "__main__":
    main()
