"""Model size knobs and the named presets (``tiny`` for tests, ``small`` ~125M, ``1b``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelConfig:
    """Every size knob of the decoder. Frozen so a config can be shared across ranks safely."""

    vocab_size: int = 32000
    dim: int = 768
    n_layers: int = 12
    n_heads: int = 12
    n_kv_heads: int | None = None  # None: same as n_heads (plain multi-head attention)
    ffn_hidden: int | None = None  # None: SwiGLU's usual 8/3 * dim rounded up to `multiple_of`
    multiple_of: int = 64
    max_seq_len: int = 2048
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    init_std: float = 0.02

    def __post_init__(self) -> None:
        positive = ("vocab_size", "dim", "n_layers", "n_heads", "multiple_of", "max_seq_len")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"model.{name} must be > 0, got {getattr(self, name)}")
        if self.dim % self.n_heads:
            raise ValueError(
                f"model.dim ({self.dim}) must be divisible by model.n_heads ({self.n_heads}): "
                "change one of them so every head has the same width"
            )
        if self.head_dim % 2:
            raise ValueError(f"head dim dim/n_heads = {self.head_dim} must be even for rotary positions")
        if self.kv_heads <= 0 or self.n_heads % self.kv_heads:
            raise ValueError(f"model.n_kv_heads ({self.n_kv_heads}) must divide model.n_heads ({self.n_heads})")
        if self.hidden <= 0:
            raise ValueError(f"model.ffn_hidden must be > 0, got {self.hidden}")

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads if self.n_kv_heads is not None else self.n_heads

    @property
    def hidden(self) -> int:
        """SwiGLU hidden width: 2/3 of 4*dim keeps the parameter count of a 4*dim GELU MLP."""
        if self.ffn_hidden is not None:
            return self.ffn_hidden
        raw = int(2 * 4 * self.dim / 3)
        return self.multiple_of * ((raw + self.multiple_of - 1) // self.multiple_of)

    def replace(self, **overrides: Any) -> ModelConfig:
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"unknown model option(s) {unknown}; valid options: {sorted(known)}")
        return dataclasses.replace(self, **overrides)


PRESETS: dict[str, ModelConfig] = {
    # Small enough that 8 CPU processes on 2 cores finish a step in well under a second.
    "tiny": ModelConfig(vocab_size=256, dim=64, n_layers=4, n_heads=4, max_seq_len=256, multiple_of=32),
    # GPT-2 small shape (~125M parameters with untied 32k vocab embeddings counted once each side).
    "small": ModelConfig(vocab_size=32000, dim=768, n_layers=12, n_heads=12, max_seq_len=2048),
    # ~1.2B: Llama-like proportions that keep matmuls large enough for tensor cores.
    "1b": ModelConfig(vocab_size=32000, dim=2048, n_layers=22, n_heads=16, max_seq_len=4096, multiple_of=256),
}


def preset(name: str, **overrides: Any) -> ModelConfig:
    """A named preset with any knob overridden; unknown names list the valid ones."""
    if name not in PRESETS:
        raise ValueError(f"unknown model preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name].replace(**overrides) if overrides else PRESETS[name]
