"""GPT-style decoder: RMSNorm, rotary positions, SwiGLU MLP, causal attention.

Layout choices serve the parallel plans: blocks sit in a ``ModuleDict`` keyed by their index so a
pipeline stage can drop the blocks it does not own and keep the original parameter names (checkpoints
then reshard across pipeline layouts by name). Head counts are inferred with ``-1`` in reshapes because
under tensor parallelism each rank holds only ``n_heads / tp`` heads. Norms, attention and the residual
fusion go through ``myolo.kernels.ops`` so the fused-backend registry decides what actually runs. A forward given a
``KVCache`` (inference) reads the keys and values of earlier positions from it and adds its own.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from myolo.kernels import ops
from myolo.kernels.model.config import ModelConfig
from myolo.kernels.model.kv_cache import KVCache, LayerCache


class RMSNorm(nn.Module):
    """Root-mean-square norm with a learned gain; the kernel is chosen by ``myolo.kernels.ops``."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.rms_norm(x, self.weight, self.eps)


def rotary_tables(cfg: ModelConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables (max_seq_len, head_dim/2) for rotary positions, computed once per model."""
    half = cfg.head_dim // 2
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, half, dtype=torch.float32) / half))
    angles = torch.outer(torch.arange(cfg.max_seq_len, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, start: int = 0) -> torch.Tensor:
    """Rotate (B, S, H, D), whose first token is at position ``start``; the two halves of D are the pairs."""
    seq = x.shape[1]
    cos = cos[start : start + seq].view(1, seq, 1, -1).to(x.dtype)
    sin = sin[start : start + seq].view(1, seq, 1, -1).to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class Attention(nn.Module):
    """Causal self-attention with grouped KV heads; runs SDPA on local (per-TP-rank) heads."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.head_dim = cfg.head_dim
        self.n_rep = cfg.n_heads // cfg.kv_heads
        self.wq = nn.Linear(cfg.dim, cfg.n_heads * cfg.head_dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.kv_heads * cfg.head_dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.kv_heads * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.dim, bias=False)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: LayerCache | None = None
    ) -> torch.Tensor:
        bsz, seq = x.shape[0], x.shape[1]
        start = cache.start if cache is not None else 0
        q = self.wq(x).view(bsz, seq, -1, self.head_dim)
        k = self.wk(x).view(bsz, seq, -1, self.head_dim)
        v = self.wv(x).view(bsz, seq, -1, self.head_dim)
        q, k = apply_rotary(q, cos, sin, start), apply_rotary(k, cos, sin, start)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if cache is not None:
            k, v = cache.append(k, v)
        if self.n_rep > 1:
            k = k.repeat_interleave(self.n_rep, dim=1)
            v = v.repeat_interleave(self.n_rep, dim=1)
        out = ops.attention(q, k, v, causal=True) if start == 0 else _attend_after(q, k, v, start)
        return self.wo(out.transpose(1, 2).reshape(bsz, seq, -1))


def _attend_after(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int) -> torch.Tensor:
    """Causal attention of queries at positions ``start..`` over keys from position 0 (a cached decode)."""
    seq = q.shape[2]
    if seq == 1:  # one new token sees every key: no mask
        return F.scaled_dot_product_attention(q, k, v)
    rows = torch.arange(start, start + seq, device=q.device).unsqueeze(1)
    allowed = torch.arange(k.shape[2], device=q.device).unsqueeze(0) <= rows
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.hidden, bias=False)
        self.w3 = nn.Linear(cfg.dim, cfg.hidden, bias=False)
        self.w2 = nn.Linear(cfg.hidden, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    """Pre-norm transformer block.

    ``fuse_residual`` lets the second norm use the fused residual-add + RMSNorm kernel. Tensor
    parallelism turns it off, because there the norm is a SequenceParallel module that must see its
    own input as a sharded DTensor.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.feed_forward = FeedForward(cfg)
        self.fuse_residual = True

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: LayerCache | None = None
    ) -> torch.Tensor:
        normed = self.attention_norm(x)
        # the cache only as a keyword, and only when there is one: tensor parallelism's input hooks count
        # the positional inputs of the modules they wrap
        attn = self.attention(normed, cos, sin) if cache is None else self.attention(normed, cos, sin, cache=cache)
        if self.fuse_residual:
            normed, h = ops.residual_rms_norm(attn, x, self.ffn_norm.weight, self.ffn_norm.eps)
            return h + self.feed_forward(normed)
        h = x + attn
        return h + self.feed_forward(self.ffn_norm(h))


class GPT(nn.Module):
    """The decoder. Any of embedding / norm / output may be ``None`` on a pipeline stage."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings: nn.Embedding | None = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleDict({str(i): Block(cfg) for i in range(cfg.n_layers)})
        self.norm: RMSNorm | None = RMSNorm(cfg.dim, cfg.norm_eps)
        self.output: nn.Linear | None = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        cos, sin = rotary_tables(cfg)
        # Not persistent: derived from the config, so checkpoints need not carry them.
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.init_weights()

    @torch.no_grad()
    def init_weights(self) -> None:
        """GPT-2 style init; output projections of residual branches scaled by depth for stability."""
        std = self.cfg.init_std
        depth_std = std / math.sqrt(2 * self.cfg.n_layers)
        for name, p in self.named_parameters():
            if p.ndim == 1:
                nn.init.ones_(p)
            elif name.endswith(("wo.weight", "w2.weight")):
                nn.init.normal_(p, 0.0, depth_std)
            else:
                nn.init.normal_(p, 0.0, std)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """tokens (B, S) -> logits (B, S, V) on a full model; stages pass hidden states through. With a
        ``cache``, ``x`` continues the sequences it holds, and it is extended by them."""
        h = self.tok_embeddings(x) if self.tok_embeddings is not None else x
        if cache is not None:
            cache.begin(x.shape[1])
        for name, block in self.layers.items():
            if cache is None:
                h = block(h, self.rope_cos, self.rope_sin)
            else:
                h = block(h, self.rope_cos, self.rope_sin, cache=cache.layers[name])
        if cache is not None:
            cache.end(x.shape[1])
        if self.norm is not None:
            h = self.norm(h)
        return self.output(h) if self.output is not None else h

    def num_params(self, exclude_embedding: bool = False) -> int:
        total = sum(p.numel() for p in self.parameters())
        if exclude_embedding and self.tok_embeddings is not None:
            total -= self.tok_embeddings.weight.numel()
        return total
