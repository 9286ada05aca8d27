"""The held-out evaluation: consecutive windows of the file in order (no seeded walk), mean cross-entropy per
token over every target, perplexity = exp(loss), and the file's checksum."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from myolo.kernels.export.evaluate import evaluate, heldout_batches
from myolo.kernels.model import GPT, preset

SEQ = 8
WINDOW = SEQ + 1


def token_file(path: Path, n: int, dtype: str = "uint16", seed: int = 0) -> Path:
    np.random.default_rng(seed).integers(0, 256, size=n).astype(dtype).tofile(path)
    return path


def test_batches_are_the_files_windows_in_order_and_the_last_may_be_short(tmp_path: Path) -> None:
    path = token_file(tmp_path / "eval.bin", 7 * WINDOW + 3)  # 7 whole windows and a tail
    tokens = np.fromfile(path, dtype=np.uint16).astype(np.int64)
    got = list(heldout_batches(path, seq_len=SEQ, rows=3, batches=5))
    assert [x.shape[0] for x, _ in got] == [3, 3, 1]  # all 7 windows, the tail left out
    windows = [tokens[i * WINDOW : (i + 1) * WINDOW] for i in range(7)]
    rows = [r for x, y in got for r in zip(x.tolist(), y.tolist(), strict=True)]
    for (inputs, targets), window in zip(rows, windows, strict=True):
        assert inputs == window[:-1].tolist() and targets == window[1:].tolist()
    assert [x.shape[0] for x, _ in heldout_batches(path, seq_len=SEQ, rows=3, batches=2)] == [3, 3]


def test_uint32_files_and_ids_beyond_the_vocabulary(tmp_path: Path) -> None:
    path = tmp_path / "wide.bin"
    np.array([70000] * (2 * WINDOW), dtype=np.uint32).tofile(path)
    (x, _), *_ = heldout_batches(path, seq_len=SEQ, rows=2, batches=1, dtype="uint32")
    assert int(x.max()) == 70000
    with pytest.raises(ValueError, match="token id 70000 >= model vocab_size 256"):
        list(heldout_batches(path, seq_len=SEQ, rows=2, batches=1, dtype="uint32", vocab_size=256))


def test_a_file_without_one_window_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fewer than one sequence"):
        list(heldout_batches(token_file(tmp_path / "short.bin", SEQ), seq_len=SEQ, rows=2, batches=1))
    with pytest.raises(FileNotFoundError):
        list(heldout_batches(tmp_path / "missing.bin", seq_len=SEQ, rows=2, batches=1))


def test_the_loss_is_mean_cross_entropy_per_token(tmp_path: Path) -> None:
    path = token_file(tmp_path / "eval.bin", 5 * WINDOW)
    torch.manual_seed(0)
    model = GPT(preset("tiny"))
    result = evaluate(model, path, seq_len=SEQ, rows=2, batches=3, vocab_size=256)
    # by hand: every window of the file, log-softmax picked at the target, in float64
    tokens = torch.from_numpy(np.fromfile(path, dtype=np.uint16).astype(np.int64)).view(5, WINDOW)
    with torch.no_grad():
        logp = torch.log_softmax(model(tokens[:, :-1]).double(), dim=-1)
    want = -logp.gather(-1, tokens[:, 1:, None]).mean().item()
    assert result.tokens == 5 * SEQ
    assert result.loss == pytest.approx(want, rel=1e-6)
    assert result.perplexity == pytest.approx(math.exp(result.loss), rel=1e-12)
    assert result.dataset == str(path.resolve())
    assert result.dataset_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert model.training  # left as it was found


class Diverged(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.full((*x.shape, 256), float("nan"))


def test_weights_with_a_non_finite_loss_are_refused(tmp_path: Path) -> None:
    path = token_file(tmp_path / "eval.bin", 2 * WINDOW)
    with pytest.raises(ValueError, match="nan nats per token: the weights are not usable"):
        evaluate(Diverged(), path, seq_len=SEQ, rows=2, batches=1)
