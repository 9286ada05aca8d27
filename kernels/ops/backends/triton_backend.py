"""Our Triton kernels (kernels/ops/triton_kernels): fused residual-add + RMSNorm and fused cross-entropy.

Usable on CUDA, or on CPU under the Triton interpreter when TRITON_INTERPRET=1 was set before the kernels
were first imported (tests do that in a subprocess). The kernels package is imported lazily so that merely
importing myolo.kernels.ops never compiles or decorates a kernel.
"""

from __future__ import annotations

import importlib.util
import os

import torch

from myolo.kernels.ops.backends.base import Backend

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def interpreter_on() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def _unavailable(op: str, device: torch.device, dtype: torch.dtype) -> str | None:
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed"
    if device.type == "cuda":
        if not torch.cuda.is_available():
            return "CUDA is not available"
    elif device.type == "cpu":
        if not interpreter_on():
            return "triton on CPU needs TRITON_INTERPRET=1 (interpreter, for tests only)"
    else:
        return f"triton backend supports cuda (and cpu via the interpreter), not {device.type}"
    if dtype not in DTYPES:
        return f"triton kernels support float32/float16/bfloat16, not {dtype}"
    return None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    from myolo.kernels.ops.triton_kernels import fused_residual_rms_norm

    return fused_residual_rms_norm(x, None, weight, eps)[0]


def residual_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    from myolo.kernels.ops.triton_kernels import fused_residual_rms_norm

    return fused_residual_rms_norm(x, residual, weight, eps)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    from myolo.kernels.ops.triton_kernels import fused_cross_entropy

    return fused_cross_entropy(logits, targets, ignore_index)


BACKEND = Backend(
    name="triton",
    impls={"rms_norm": rms_norm, "residual_rms_norm": residual_rms_norm, "cross_entropy": cross_entropy},
    unavailable=_unavailable,
    dtensor_capable=False,
)
