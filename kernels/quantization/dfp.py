"""Dynamic fixed point (Ristretto, Gysel et al. 2016), one power-of-two scale per layer.

A layer's weights share a fixed-point format of ``bits`` bits: enough integer bits to hold ``max|w|`` (and the
sign), the fractional length ``fl`` takes the rest, and every weight is rounded to a multiple of ``2^-fl``.
Activations get a format of their own from the largest input the calibration set showed. Kept as the named
baseline: at 8 bits it is fine, at 4 a single scale for a whole matrix cannot follow its rows.
"""

from __future__ import annotations

import math

import torch

from myolo.kernels.quantization.grid import PARAM_DTYPE, Grid, QuantizedWeight


def fractional_length(max_abs: float, bits: int) -> int:
    """``fl`` of the format that holds ``max_abs``: ``bits - 1`` sign and integer bits' worth less."""
    if max_abs <= 0 or not math.isfinite(max_abs):
        return bits - 1
    integer = math.floor(math.log2(max_abs)) + 1  # bits to hold max_abs's integer part
    return bits - 1 - integer


def dynamic_fixed_point(w: torch.Tensor, bits: int) -> QuantizedWeight:
    """Codes (symmetric, around ``mid``) and the layer's one scale ``2^-fl``, repeated per row."""
    grid = Grid(bits, 0, symmetric=True)
    fl = fractional_length(float(w.detach().abs().max()), bits)
    step = 2.0**-fl
    signed = torch.clamp(torch.round(w.detach().float() / step), -grid.mid, grid.mid - 1)
    q = (signed + grid.mid).to(torch.uint8)
    scale = torch.full((w.shape[0], 1), step, dtype=PARAM_DTYPE, device=w.device)  # a power of two: exact in bfloat16
    return QuantizedWeight(q, scale, torch.zeros_like(scale), grid)


def quantize_activation(x: torch.Tensor, fl: int, bits: int) -> torch.Tensor:
    """``x`` rounded onto the activation format (a float tensor holding fixed-point values)."""
    step = 2.0**-fl
    top = (1 << (bits - 1)) - 1
    return torch.clamp(torch.round(x / step), -top - 1, top) * step
