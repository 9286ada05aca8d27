"""The watermark's false-positive rate at its decision threshold, bounded by enough null checks.

A false positive needs at least 167 of 256 bits to match where the null holds (p < 1e-6 by the law). To
bound the rate at <= 0.1 % with 95 % confidence when none occurs takes about 3,840 checks, more than the main
benchmark's 1,102 on its 5 M-parameter model (``bench_watermark``). The law does not depend on the model: a
wrong key's message bits come from that key alone, independent of the weights and of its own projections.
So this benchmark runs the same null check (``bench_watermark.null_distribution``: matched bits, a KS test of
their randomized probability integral transform, the rate at the threshold with its Wilson interval) on the
preset ``tiny`` model marked by ``DigitalWatermark.apply`` (on random tokens: the data does not matter to
the null), with ``--wrong-keys`` keys (4,000) and ``--random-models`` unmarked models (100).
Run: python -m tests.benchmarks watermark_null [--wrong-keys N]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

import torch

from myolo.kernels.model import GPT
from myolo.kernels.model.config import preset
from myolo.kernels.watermark import DigitalWatermark
from tests.benchmarks.bench_watermark import KEY, null_distribution
from tests.benchmarks.common import write_result


def random_batches(vocab: int, seq: int, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    while True:
        tokens = torch.randint(0, vocab, (8, seq + 1), generator=gen)
        yield tokens[:, :-1], tokens[:, 1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wrong-keys", type=int, default=4000)
    parser.add_argument("--random-models", type=int, default=100)
    parser.add_argument("--embed-steps", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    opts = parser.parse_args()
    torch.set_num_threads(opts.threads)
    cfg = preset("tiny")
    torch.manual_seed(0)
    marked = GPT(cfg)
    mark = DigitalWatermark.generate(key=KEY)
    report = mark.apply(marked, random_batches(cfg.vocab_size, 64, seed=1), steps=opts.embed_steps, lr=1e-3)
    marked.eval()
    own = mark.verify(marked)
    randoms = []
    for seed in range(opts.random_models):
        torch.manual_seed(1000 + seed)
        randoms.append(GPT(cfg).eval())
    t0 = time.perf_counter()
    null = null_distribution(marked, randoms, mark, opts.wrong_keys)
    write_result(
        "watermark_null",
        {
            "model": "tiny (preset), marked on random tokens",
            "embed_steps": opts.embed_steps,
            "embed_min_margin": report.min_margin,
            "true_key": {"matched": own.matched, "p_value": own.p_value, "marked": own.marked},
            "null": null,
            "null_seconds": round(time.perf_counter() - t0, 1),
            "goal_false_positives_at_most": 0.001,
            "upper_bound_meets_goal": null["false_positive_rate"]["ci95"][1] <= 0.001,
        },
    )


if __name__ == "__main__":
    main()
