"""The token-source protocol and the per-data-parallel-rank row slice."""

from __future__ import annotations

from typing import Protocol

import torch


class TokenSource(Protocol):
    """Yields the whole global batch of a step as (inputs, targets), each (global_batch, seq_len)."""

    def global_batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]: ...


def local_rows(batch: torch.Tensor, dp_rank: int, dp: int) -> torch.Tensor:
    """The contiguous rows data-parallel rank ``dp_rank`` of ``dp`` trains on."""
    rows = batch.shape[0]
    if rows % dp:
        raise ValueError(f"global batch {rows} is not divisible by dp={dp}")
    per = rows // dp
    return batch[dp_rank * per : (dp_rank + 1) * per]


def open_source(
    path: str | None, vocab_size: int, global_batch: int, seq_len: int, seed: int, dtype: str = "uint16"
) -> TokenSource:
    """A token file when ``path`` is given, the seeded synthetic stream otherwise."""
    from myolo.kernels.data.synthetic import SyntheticTokens
    from myolo.kernels.data.tokenfile import TokenFile

    if path:
        return TokenFile(path, global_batch, seq_len, seed=seed, dtype=dtype, vocab_size=vocab_size)
    return SyntheticTokens(vocab_size, global_batch, seq_len, seed)
