"""The held-out evaluation of exported weights: mean cross-entropy per token, and perplexity = exp(loss).

Deterministic on purpose, unlike training's seeded walk (``myolo.kernels.data.tokenfile``): batch ``b`` holds the
file's consecutive windows ``b x rows ... (b + 1) x rows - 1`` of ``seq_len + 1`` tokens, so two models
evaluated on the same file and settings see exactly the same tokens, and a champion and its challenger
compare. A file shorter than ``batches x rows`` windows is read whole (the result counts its tokens).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from myolo.common.digest import sha256_file
from myolo.events.payloads.models import EvalResult
from myolo.kernels.data.tokenfile import TokenFile

MAX_LOSS = 700.0  # exp() of more overflows a float; no model that learned anything is near it


def heldout_batches(
    path: str | os.PathLike[str],
    *,
    seq_len: int,
    rows: int,
    batches: int,
    dtype: str = "uint16",
    vocab_size: int | None = None,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(inputs, targets) int64 batches of the file in order; the last may have fewer rows."""
    if rows < 1 or batches < 1:
        raise ValueError(f"held-out rows ({rows}) and batches ({batches}) must be >= 1")
    tokens = TokenFile(path, rows, seq_len, dtype=dtype, vocab_size=vocab_size)  # checks size and format
    window = seq_len + 1
    n_windows = min(tokens.n_windows, rows * batches)
    for first in range(0, n_windows, rows):
        count = min(rows, n_windows - first)
        flat = tokens.tokens[first * window : (first + count) * window].to(torch.int64)
        batch = flat.view(count, window)
        if vocab_size is not None and int(batch.max()) >= vocab_size:
            raise ValueError(
                f"held-out file {path} contains token id {int(batch.max())} >= model vocab_size {vocab_size}; "
                "tokenize it with the model's vocabulary"
            )
        yield batch[:, :-1], batch[:, 1:]


@torch.inference_mode()
def evaluate(
    model: nn.Module,
    path: str | os.PathLike[str],
    *,
    seq_len: int,
    rows: int,
    batches: int,
    dtype: str = "uint16",
    vocab_size: int | None = None,
    device: torch.device | str = "cpu",
    on_batch: Callable[[], None] | None = None,
) -> EvalResult:
    """Mean next-token cross-entropy (nats, fp32 logits, summed in fp64) of ``model`` over the held-out file."""
    was_training = model.training
    model.eval()
    total, tokens = 0.0, 0
    try:
        for inputs, targets in heldout_batches(
            path, seq_len=seq_len, rows=rows, batches=batches, dtype=dtype, vocab_size=vocab_size
        ):
            logits = model(inputs.to(device))
            loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.to(device).flatten(), reduction="sum")
            total += float(loss.double())
            tokens += targets.numel()
            if on_batch is not None:
                on_batch()
    finally:
        model.train(was_training)
    mean = total / tokens
    if not math.isfinite(mean) or mean > MAX_LOSS:
        raise ValueError(
            f"held-out loss on {path} is {mean} nats per token: the weights are not usable (training diverged?); "
            "nothing is exported as a model"
        )
    return EvalResult(
        dataset=str(Path(path).resolve()),
        dataset_sha256=sha256_file(path).sha256,
        tokens=tokens,
        loss=mean,
        perplexity=math.exp(mean),
    )
