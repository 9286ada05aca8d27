"""A seeded synthetic token stream that a model can actually learn.

Uniform random tokens would keep the loss flat at ln(vocab), which hides a broken optimiser. Each row
here is an arithmetic progression modulo the vocabulary (random start and stride) with a small fraction
of tokens replaced by noise, so the loss falls as the model learns the pattern in context.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SyntheticTokens:
    vocab_size: int
    batch_size: int
    seq_len: int
    seed: int
    noise: float = 0.1

    def global_batch_tokens(self, step: int) -> torch.Tensor:
        """(global_batch, seq_len + 1) int64 tokens for ``step``; a pure function of (seed, step)."""
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        rows, length = self.batch_size, self.seq_len + 1
        start = torch.randint(0, self.vocab_size, (rows, 1), generator=gen)
        stride = torch.randint(1, max(2, min(self.vocab_size, 17)), (rows, 1), generator=gen)
        tokens = (start + stride * torch.arange(length)) % self.vocab_size
        noisy = torch.rand(rows, length, generator=gen) < self.noise
        random = torch.randint(0, self.vocab_size, (rows, length), generator=gen)
        return torch.where(noisy, random, tokens)

    def global_batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = self.global_batch_tokens(step)
        return tokens[:, :-1], tokens[:, 1:]
