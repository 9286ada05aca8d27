"""The keys and values of the positions a decoder has seen, so each new token attends without recomputing them.

One preallocated ``(batch, kv_heads, max_len, head_dim)`` pair per layer: decoding writes in place and reads a
view, so a step allocates nothing that grows with the sequence. Keys are stored after their rotary rotation
(a position's rotation never changes), and before any repetition for grouped KV heads (the cache holds
``kv_heads``, not ``n_heads``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from myolo.kernels.model.config import ModelConfig


@dataclass
class LayerCache:
    """One layer's keys and values; ``start`` is the position of the first token of the current call."""

    k: torch.Tensor
    v: torch.Tensor
    start: int = 0

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store (B, kv_heads, S, D) at ``start`` and return every key and value up to them."""
        end = self.start + k.shape[2]
        if end > self.k.shape[2]:
            raise ValueError(f"the KV cache holds {self.k.shape[2]} positions; this call needs {end}")
        self.k[:, :, self.start : end] = k
        self.v[:, :, self.start : end] = v
        return self.k[:, :, :end], self.v[:, :, :end]


class KVCache:
    """Every layer's cache, and how many positions are filled (the next token's position)."""

    def __init__(self, layers: dict[str, LayerCache], max_len: int) -> None:
        self.layers = layers
        self.max_len = max_len
        self.length = 0

    @classmethod
    def empty(
        cls, cfg: ModelConfig, batch: int, max_len: int, *, dtype: torch.dtype, device: torch.device | str = "cpu"
    ) -> KVCache:
        """A cache for ``batch`` sequences of up to ``max_len`` positions (at most the model's ``max_seq_len``)."""
        if not 1 <= max_len <= cfg.max_seq_len:
            raise ValueError(f"max_len must be in 1..{cfg.max_seq_len} (the model's max_seq_len), got {max_len}")
        shape = (batch, cfg.kv_heads, max_len, cfg.head_dim)
        layers = {
            str(i): LayerCache(
                torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device)
            )
            for i in range(cfg.n_layers)
        }
        return cls(layers, max_len)

    def begin(self, seq: int) -> None:
        """A forward of ``seq`` new tokens starts: each layer writes them at the current length."""
        if self.length + seq > self.max_len:
            raise ValueError(
                f"the KV cache holds {self.max_len} positions: {self.length} are filled and {seq} more do not fit"
            )
        for layer in self.layers.values():
            layer.start = self.length

    def end(self, seq: int) -> None:
        """The forward of ``seq`` tokens is done: they are part of the context from now on."""
        self.length += seq
