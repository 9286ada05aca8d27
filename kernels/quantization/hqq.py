"""HQQ (half-quadratic quantization, Badri & Shaji 2023): the zero points that minimise a sparsity-promoting
error norm of the rounded weights, with no calibration data.

Plain rounding minimises nothing: it maps each group's min..max onto the grid, so one outlier stretches the
whole group. HQQ keeps the scale and solves for the zero that minimises ``|W - dequant(round(W))|_p`` with
``p < 1`` (heavy-tailed errors are cheap, so outliers stop dictating the grid), by half-quadratic splitting:
alternately shrink the error towards a sparse one, and set the zero to the mean that explains the rest. Why
HQQ rather than AWQ here: it needs no calibration set (a quantized version can be made from any export), it
is a few tensor operations per group, and the anchors show it ahead of plain rounding at 4 bits.
"""

from __future__ import annotations

import torch

from myolo.kernels.quantization.grid import PARAM_DTYPE, Grid, QuantizedWeight, codes, minmax

P_NORM = 0.7
BETA = 10.0
KAPPA = 1.01
ITERS = 20


def _shrink(x: torch.Tensor, beta: float, p: float) -> torch.Tensor:
    """The proximal step of the l_p norm: soft-threshold each error by ``|x|^(p-1) / beta``."""
    return torch.sign(x) * torch.relu(x.abs() - (1.0 / beta) * x.abs().clamp_min(1e-8).pow(p - 1))


def hqq(w: torch.Tensor, grid: Grid, *, iters: int = ITERS) -> QuantizedWeight:
    """Codes, scales and zeros of ``w`` (N, K) on an asymmetric ``grid``, the zeros optimised."""
    if grid.symmetric:
        raise ValueError("HQQ optimises zero points: it needs an asymmetric grid")
    n, k = w.shape
    groups, size = grid.groups(k), grid.group(k)
    g = w.detach().float().reshape(n * groups, size)
    scale, zero = minmax(g, Grid(grid.bits, 0))
    s = scale.float()
    z = grid.mid - zero.float() / s  # the zero in code units: w = (q - z) * s
    beta, best, best_z = BETA, float("inf"), z.clone()
    for _ in range(iters):
        q = torch.clamp(torch.round(g / s + z), 0, grid.levels)
        error = g - (q - z) * s
        loss = float(error.abs().pow(P_NORM).mean())
        if loss < best:
            best, best_z = loss, z.clone()
        elif loss > best * 1.0001:
            break
        sparse = _shrink(error, beta, P_NORM)
        z = torch.mean(q - (g - sparse) / s, dim=1, keepdim=True)
        beta *= KAPPA
    zero = ((grid.mid - best_z) * s).to(PARAM_DTYPE)
    scale = scale.reshape(n, groups)
    zero = zero.reshape(n, groups)
    return QuantizedWeight(codes(w, scale, zero, grid), scale, zero, grid)
