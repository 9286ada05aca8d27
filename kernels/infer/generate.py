"""Prefill then decode with a KV cache: greedy, temperature and top-k sampling, timed apart.

The prompt runs through the model once (prefill, every position at once); each new token then runs alone
against the cache (decode). Their speeds differ by orders of magnitude and are bound by different things
(prefill by matmul throughput, batch-1 decode by reading the weights), so each is timed and reported apart.
Sampling is seeded: the same prompt, seed and settings give the same tokens.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from myolo.kernels.model.config import ModelConfig
from myolo.kernels.model.kv_cache import KVCache


@dataclass(frozen=True)
class Sampling:
    """``temperature`` 0 is greedy (the most likely token); ``top_k`` keeps that many candidates (None: all)."""

    temperature: float = 0.0
    top_k: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.temperature <= 100.0:
            raise ValueError(f"temperature must be in 0..100 (0: greedy), got {self.temperature}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k must be >= 1 (or unset for every token), got {self.top_k}")


@dataclass(frozen=True)
class Generated:
    """The new tokens of each sequence (the prompt not included) and the time prefill and decode took."""

    tokens: list[list[int]]
    prompt_tokens: int
    prefill_s: float
    decode_s: float

    @property
    def new_tokens(self) -> int:
        return sum(len(t) for t in self.tokens)

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prompt_tokens / self.prefill_s if self.prefill_s > 0 else float("inf")

    @property
    def decode_tokens_per_s(self) -> float:
        """Tokens made by the decode steps (the first new token comes from the prefill) per second."""
        decoded = self.new_tokens - len(self.tokens)
        return decoded / self.decode_s if self.decode_s > 0 else float("inf")


def pick(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator | None) -> torch.Tensor:
    """(B, V) logits -> (B,) next tokens."""
    if sampling.temperature == 0.0:
        return logits.argmax(dim=-1)
    scaled = logits.float() / sampling.temperature
    if sampling.top_k is not None and sampling.top_k < scaled.shape[-1]:
        kth = scaled.topk(sampling.top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return torch.multinomial(scaled.softmax(dim=-1), 1, generator=generator).squeeze(-1)


@torch.inference_mode()
def generate(
    model: nn.Module,
    cfg: ModelConfig,
    prompt: torch.Tensor,
    max_new_tokens: int,
    sampling: Sampling = Sampling(),  # frozen: safe to share
    *,
    eos: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Generated:
    """Continue each row of ``prompt`` (B, S) token ids by up to ``max_new_tokens``; a row stops at ``eos``."""
    if prompt.ndim != 2 or prompt.shape[1] < 1:
        raise ValueError(f"the prompt must be (batch, tokens) with at least one token, got shape {list(prompt.shape)}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    total = prompt.shape[1] + max_new_tokens
    if total > cfg.max_seq_len:
        raise ValueError(
            f"prompt ({prompt.shape[1]} tokens) + max_new_tokens ({max_new_tokens}) = {total} exceeds the model's "
            f"max_seq_len {cfg.max_seq_len}: shorten the prompt or ask for fewer tokens"
        )
    if int(prompt.min()) < 0 or int(prompt.max()) >= cfg.vocab_size:
        raise ValueError(f"the prompt holds token ids outside 0..{cfg.vocab_size - 1} (the model's vocabulary)")
    was_training = model.training
    model.eval()
    param = next(model.parameters(), None)
    device = param.device if param is not None else torch.device("cpu")
    dtype = _activation_dtype(model)
    cache = KVCache.empty(cfg, prompt.shape[0], total, dtype=dtype, device=device)
    generator = torch.Generator(device=device).manual_seed(sampling.seed) if sampling.temperature else None
    try:
        began = clock()
        logits = model(prompt.to(device), cache)[:, -1]
        token = pick(logits, sampling, generator)
        _sync(device)
        prefill_s = clock() - began
        out = [token]
        done = token == eos if eos is not None else torch.zeros_like(token, dtype=torch.bool)
        began = clock()
        for _ in range(max_new_tokens - 1):
            if bool(done.all()):
                break
            token = pick(model(token.unsqueeze(1), cache)[:, -1], sampling, generator)
            out.append(token)
            if eos is not None:
                done |= token == eos
        _sync(device)
        decode_s = clock() - began
    finally:
        model.train(was_training)
    rows = torch.stack(out, dim=1).tolist()
    if eos is not None:
        rows = [row[: row.index(eos) + 1] if eos in row else row for row in rows]
    return Generated(tokens=rows, prompt_tokens=prompt.numel(), prefill_s=prefill_s, decode_s=decode_s)


def _activation_dtype(model: nn.Module) -> torch.dtype:
    """The dtype the model computes in: its first floating-point parameter's (a quantized model keeps its
    norms and embeddings in it)."""
    for p in model.parameters():
        if p.is_floating_point():
            return p.dtype
    return torch.float32


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
