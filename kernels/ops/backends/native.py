"""torch's own fused ops: F.rms_norm, F.layer_norm, F.cross_entropy, SDPA (autotuned), AdamW(fused=True).

These are DTensor-capable (they dispatch through DTensor sharding rules), so tensor/sequence-parallel
inputs always end here or at the reference.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from myolo.kernels.ops.autotune import attention_autotuner
from myolo.kernels.ops.backends.base import Backend
from myolo.kernels.ops.util import is_dtensor


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def residual_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    h = x + residual
    return F.rms_norm(h, (h.shape[-1],), weight, eps), h


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    return F.cross_entropy(logits, targets, ignore_index=ignore_index).float()


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    if is_dtensor(q):  # no autotune on DTensors: SDPA's own dispatch picks what has a sharding rule
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return attention_autotuner().run(q, k, v, causal)


def make_adamw(params, lr, betas, eps, weight_decay) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, fused=True)


def fused_adamw_devices() -> list[str]:
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

        return list(_get_fused_kernels_supported_devices())
    except ImportError:  # older torch: fused AdamW was CUDA-only
        return ["cuda"]


def _unavailable(op: str, device: torch.device, dtype: torch.dtype) -> str | None:
    if op == "rms_norm" or op == "residual_rms_norm":
        return None if hasattr(F, "rms_norm") else "F.rms_norm needs torch >= 2.4"
    if op == "adamw":
        if device.type not in fused_adamw_devices():
            return f"AdamW(fused=True) is not supported on {device.type}"
        if not dtype.is_floating_point:
            return f"AdamW(fused=True) needs floating-point parameters, got {dtype}"
    return None


BACKEND = Backend(
    name="native",
    impls={
        "rms_norm": rms_norm,
        "residual_rms_norm": residual_rms_norm,
        "layer_norm": layer_norm,
        "cross_entropy": cross_entropy,
        "attention": attention,
        "adamw": make_adamw,
    },
    unavailable=_unavailable,
    dtensor_capable=True,
)
