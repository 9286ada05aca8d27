"""NVIDIA Apex, only when it was built with its CUDA extensions.

Why the extension check: a Python-only apex build imports fine but lacks the fused kernels (and the PyPI
package named "apex" is unrelated). So availability means: `apex.normalization` / `apex.optimizers`
import AND the compiled modules `fused_layer_norm_cuda` (norms) / `amp_C` (FusedAdam) import.
Apex's fused cross-entropy (contrib xentropy) masks ignored tokens by a padding class, not an ignore index,
so it is not used; cross-entropy goes to native/triton.
"""

from __future__ import annotations

import functools
import importlib

import torch

from myolo.kernels.ops.backends.base import Backend

_NEEDS = {
    "rms_norm": ("apex.normalization.fused_layer_norm", "fused_layer_norm_cuda"),
    "residual_rms_norm": ("apex.normalization.fused_layer_norm", "fused_layer_norm_cuda"),
    "layer_norm": ("apex.normalization.fused_layer_norm", "fused_layer_norm_cuda"),
    "adamw": ("apex.optimizers", "amp_C"),
}


@functools.cache
def module_error(name: str) -> str | None:
    """None when `name` imports, else why not. Cached: an import attempt is not free."""
    try:
        importlib.import_module(name)
    except Exception as e:  # ImportError, or OSError/RuntimeError from a broken CUDA extension
        return f"{type(e).__name__}: {e}"
    return None


def apex_status() -> dict[str, str]:
    """Per op: "available" or the reason it is not (reported by the benchmark and gpu_check)."""
    return {op: _extension_reason(op) or "available" for op in _NEEDS}


def _extension_reason(op: str) -> str | None:
    if module_error("apex") is not None:
        return "apex is not installed"
    python_module, extension = _NEEDS[op]
    if module_error(python_module) is not None:
        return f"{python_module} does not import (not NVIDIA apex?): {module_error(python_module)}"
    if module_error(extension) is not None:
        return (
            f"apex has no compiled '{extension}' extension (a Python-only build); rebuild apex with "
            "APEX_CPP_EXT=1 APEX_CUDA_EXT=1"
        )
    return None


def _unavailable(op: str, device: torch.device, dtype: torch.dtype) -> str | None:
    if device.type != "cuda":
        return f"apex kernels need a CUDA device, got {device.type}"
    return _extension_reason(op)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    from apex.normalization.fused_layer_norm import fused_rms_norm_affine

    return fused_rms_norm_affine(x, weight, (x.shape[-1],), eps)


def residual_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    h = x + residual  # apex has no fused residual add; the norm itself is apex's kernel
    return rms_norm(h, weight, eps), h


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float) -> torch.Tensor:
    from apex.normalization.fused_layer_norm import fused_layer_norm_affine

    if bias is None:
        bias = torch.zeros_like(weight)
    return fused_layer_norm_affine(x, weight, bias, (x.shape[-1],), eps)


def make_adamw(params, lr, betas, eps, weight_decay) -> torch.optim.Optimizer:
    from apex.optimizers import FusedAdam

    return FusedAdam(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, adam_w_mode=True)


BACKEND = Backend(
    name="apex",
    impls={
        "rms_norm": rms_norm,
        "residual_rms_norm": residual_rms_norm,
        "layer_norm": layer_norm,
        "adamw": make_adamw,
    },
    unavailable=_unavailable,
    dtensor_capable=False,
)
