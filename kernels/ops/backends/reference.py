"""Plain torch math: always available, works on any device, dtype and on DTensors.

Why it exists: it is the yardstick every other backend is tested against and the last resort when nothing
fused is usable. It computes in fp32 and casts back, so its answer is the best available for low precision.
"""

from __future__ import annotations

import math

import torch

from myolo.kernels.ops.backends.base import Backend
from myolo.kernels.ops.backends.reference_adamw import ReferenceAdamW


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float()).to(x.dtype)


def residual_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    h = x + residual
    return rms_norm(h, weight, eps), h


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float) -> torch.Tensor:
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    var = (xf - mean).pow(2).mean(-1, keepdim=True)
    y = (xf - mean) * torch.rsqrt(var + eps) * weight.float()
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    lf = logits.float()
    valid = targets != ignore_index
    safe = torch.where(valid, targets, torch.zeros_like(targets))
    picked = lf.gather(1, safe.unsqueeze(1)).squeeze(1)
    per_token = (torch.logsumexp(lf, dim=-1) - picked) * valid
    return per_token.sum() / valid.sum()


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        s_q, s_k = q.shape[-2], k.shape[-2]
        # Bottom-right aligned like SDPA's is_causal only when s_q == s_k; the trainer always has that.
        mask = torch.ones(s_q, s_k, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    return (scores.softmax(-1) @ v.float()).to(q.dtype)


def make_adamw(params, lr, betas, eps, weight_decay) -> torch.optim.Optimizer:
    return ReferenceAdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


BACKEND = Backend(
    name="reference",
    impls={
        "rms_norm": rms_norm,
        "residual_rms_norm": residual_rms_norm,
        "layer_norm": layer_norm,
        "cross_entropy": cross_entropy,
        "attention": attention,
        "adamw": make_adamw,
    },
    unavailable=lambda op, device, dtype: None,
    dtensor_capable=True,
)
