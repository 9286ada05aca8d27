"""A real token file: a flat binary array of uint16 or uint32 token ids, memory-mapped.

Rows of step ``s`` are read at offsets that depend only on (seed, s, row), so every data-parallel layout
sees the same global batch and resuming at step ``s`` needs no saved iterator state. The file is
walked in a seeded permutation of non-overlapping windows, one epoch after another.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

_DTYPES = {"uint16": (torch.uint16, 2), "uint32": (torch.uint32, 4)}


class TokenFile:
    def __init__(
        self,
        path: str | os.PathLike[str],
        global_batch: int,
        seq_len: int,
        seed: int = 0,
        dtype: str = "uint16",
        vocab_size: int | None = None,
    ) -> None:
        if dtype not in _DTYPES:
            raise ValueError(f"data.dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"data.path {str(self.path)!r} does not exist or is not a file")
        torch_dtype, width = _DTYPES[dtype]
        size = self.path.stat().st_size
        if size % width:
            raise ValueError(f"{self.path} has {size} bytes, not a whole number of {dtype} tokens")
        self.n_tokens = size // width
        self.window = seq_len + 1
        self.n_windows = self.n_tokens // self.window
        if self.n_windows < 1:
            raise ValueError(f"{self.path} holds {self.n_tokens} tokens, fewer than one sequence of {self.window}")
        # shared=False maps the file copy-on-write: pages load lazily and the file is never written.
        self.tokens = torch.from_file(str(self.path), shared=False, size=self.n_tokens, dtype=torch_dtype)
        self.global_batch_size, self.seq_len, self.seed = global_batch, seq_len, seed
        self.vocab_size = vocab_size

    def _window_index(self, step: int) -> torch.Tensor:
        """Global indices of the windows used by ``step``: consecutive slots of a per-epoch permutation."""
        first = step * self.global_batch_size
        slots = torch.arange(first, first + self.global_batch_size)
        epochs, within = slots // self.n_windows, slots % self.n_windows
        out = torch.empty_like(slots)
        for epoch in epochs.unique().tolist():
            gen = torch.Generator().manual_seed(self.seed * 7919 + epoch)
            perm = torch.randperm(self.n_windows, generator=gen)
            mask = epochs == epoch
            out[mask] = perm[within[mask]]
        return out

    def global_batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        starts = self._window_index(step) * self.window
        rows = [self.tokens[s : s + self.window].to(torch.int64) for s in starts.tolist()]
        batch = torch.stack(rows)
        if self.vocab_size is not None and int(batch.max()) >= self.vocab_size:
            raise ValueError(
                f"{self.path} contains token id {int(batch.max())} >= model vocab_size {self.vocab_size}; "
                "raise model.vocab_size or re-tokenize"
            )
        return batch[:, :-1], batch[:, 1:]
