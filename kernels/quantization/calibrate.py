"""The calibration set: token sequences from a token file, a tensor, or any iterable of batches (a DataLoader).

Bounded (``max_sequences`` rows of at most the model's ``max_seq_len``), checked against the vocabulary, and
named by a SHA-256: the token file's own for a file (what an operator can check against the job's data), else
that of the tokens used. The registry keeps it so a calibration set and an evaluation set can be told apart.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from myolo.common.digest import sha256_file
from myolo.kernels.export.evaluate import heldout_batches


@dataclass(frozen=True)
class CalibrationSet:
    """``batches``: int64 (rows, seq) tensors; ``sha256``: the file's, or the tokens'; ``source``: what it was."""

    batches: list[torch.Tensor]
    sha256: str
    source: str

    @property
    def sequences(self) -> int:
        return sum(b.shape[0] for b in self.batches)

    @property
    def tokens(self) -> int:
        return sum(b.numel() for b in self.batches)


CalibSource = str | os.PathLike[str] | torch.Tensor | CalibrationSet | Iterable[Any]


def calibration_set(
    source: CalibSource,
    *,
    vocab_size: int,
    max_seq_len: int,
    seq_len: int = 256,
    max_sequences: int = 128,
    batch: int = 8,
    dtype: str = "uint16",
) -> CalibrationSet:
    """Read up to ``max_sequences`` sequences from ``source``; ValueError naming what is wrong with it. A
    ``CalibrationSet`` read already is taken as it is."""
    if isinstance(source, CalibrationSet):
        return source
    if max_sequences < 1 or batch < 1:
        raise ValueError(f"calibration needs max_sequences >= 1 and batch >= 1, got {max_sequences}, {batch}")
    if not 1 <= seq_len <= max_seq_len:
        raise ValueError(f"calibration seq_len must be in 1..{max_seq_len} (the model's max_seq_len), got {seq_len}")
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        batches = [
            inputs
            for inputs, _ in heldout_batches(
                path,
                seq_len=seq_len,
                rows=batch,
                batches=-(-max_sequences // batch),
                dtype=dtype,
                vocab_size=vocab_size,
            )
        ]
        return _checked(batches, max_sequences, vocab_size, max_seq_len, sha256_file(path)[0], f"token file {path}")
    items = [source] if isinstance(source, torch.Tensor) else source
    batches, rows = [], 0
    for i, item in enumerate(items):
        tokens = item[0] if isinstance(item, tuple | list) and item else item
        if not isinstance(tokens, torch.Tensor) or tokens.ndim not in (1, 2) or tokens.is_floating_point():
            raise ValueError(
                f"calibration batch {i} is {type(tokens).__name__}"
                + (f" of shape {list(tokens.shape)}, dtype {tokens.dtype}" if isinstance(tokens, torch.Tensor) else "")
                + ": give integer token ids shaped (batch, seq) or (seq,), or (inputs, targets) pairs"
            )
        tokens = tokens.reshape(1, -1) if tokens.ndim == 1 else tokens
        batches.append(tokens[: max_sequences - rows].to(torch.int64).cpu())
        rows += batches[-1].shape[0]
        if rows >= max_sequences:
            break
    digest = hashlib.sha256()
    for b in batches:
        digest.update(b.numpy().tobytes())
    return _checked(batches, max_sequences, vocab_size, max_seq_len, digest.hexdigest(), "token batches")


def _checked(
    batches: list[torch.Tensor], max_sequences: int, vocab_size: int, max_seq_len: int, sha256: str, source: str
) -> CalibrationSet:
    batches = [b for b in batches if b.numel()]
    if not batches:
        raise ValueError(f"the calibration set ({source}) holds no tokens")
    for i, b in enumerate(batches):
        if b.shape[1] > max_seq_len:
            raise ValueError(
                f"calibration batch {i} has sequences of {b.shape[1]} tokens, over the model's max_seq_len {max_seq_len}"
            )
        if int(b.min()) < 0 or int(b.max()) >= vocab_size:
            raise ValueError(
                f"calibration batch {i} holds token id {int(b.max()) if int(b.max()) >= vocab_size else int(b.min())}, "
                f"outside the model's vocabulary 0..{vocab_size - 1}"
            )
    return CalibrationSet(batches, sha256, source)
