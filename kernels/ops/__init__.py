"""Fused ops for the trainer, each dispatched through the backend registry (apex, native, triton, reference).

Call `configure(device=..., dtype=...)` once at start: it resolves and logs the backend per op. Each call
re-checks only its own input (device, dtype, DTensor) against a cached selection, so a DTensor input goes to
a DTensor-capable backend even when a raw kernel was chosen for plain tensors. `selected_backends()` is what
the calls actually used, for progress reports.
"""

from __future__ import annotations

import torch

from myolo.kernels.ops.registry import OPS, availability, configure, resolve, selected_backends
from myolo.kernels.ops.registry import note_used as _note_used
from myolo.kernels.ops.util import first_tensor as _first_tensor
from myolo.kernels.ops.util import is_dtensor as _is_dtensor

__all__ = [
    "OPS",
    "attention",
    "availability",
    "configure",
    "cross_entropy",
    "layer_norm",
    "make_adamw",
    "residual_rms_norm",
    "rms_norm",
    "selected_backends",
]


def _pick(op: str, t: torch.Tensor):
    name, impl = resolve(op, t.device, t.dtype, _is_dtensor(t))
    _note_used(op, name)
    return impl


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim, scaled by weight."""
    return _pick("rms_norm", x)(x, weight, eps)


def residual_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(rms_norm(x + residual) * weight, x + residual): the pre-norm block's add and norm in one op."""
    return _pick("residual_rms_norm", x)(x, residual, weight, eps)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float) -> torch.Tensor:
    """LayerNorm over the last dim."""
    return _pick("layer_norm", x)(x, weight, bias, eps)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Mean softmax cross-entropy (fp32 scalar) over tokens whose target != ignore_index."""
    return _pick("cross_entropy", logits)(logits, targets, ignore_index)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """Scaled dot-product attention on (batch, heads, seq, head_dim) tensors."""
    return _pick("attention", q)(q, k, v, causal)


def make_adamw(
    params, lr: float, betas: tuple[float, float] = (0.9, 0.95), eps: float = 1e-8, weight_decay: float = 0.0
) -> torch.optim.Optimizer:
    """AdamW from the best backend for the parameters' device/dtype (fused when the device supports it)."""
    params = list(params)
    t = _first_tensor(params)
    if t is None:
        raise ValueError("make_adamw: params is empty; pass the model's parameters (or param groups)")
    return _pick("adamw", t)(params, lr, tuple(betas), eps, weight_decay)
