"""GPTQ (Frantar et al., 2022): round a layer column by column, pushing each column's rounding error onto the
columns not rounded yet, weighted by the inverse Hessian of the layer's inputs.

For a linear layer ``y = x W^T`` the loss of a rounded ``W`` over calibration inputs ``X`` is quadratic with
Hessian ``H = 2 X^T X / n``. Rounding column ``i`` leaves an error that the remaining columns can compensate:
with ``U`` the upper Cholesky factor of ``H^-1``, column ``i``'s error ``(w_i - q_i) / U_ii`` times row ``i`` of
``U`` is subtracted from the columns after it. Columns go in blocks (the update of the columns beyond a block
is one matmul, the lazy batch update of the paper); a group's scale and zero are chosen when its first column
comes up, from the weights as the errors before it left them. No reordering by activation size (act-order):
with groups it breaks the contiguous groups the packed kernels need.
"""

from __future__ import annotations

import torch

from myolo.kernels.quantization.grid import Grid, QuantizedWeight, codes, dequantize, minmax

DAMP = 0.01  # of the mean diagonal, added to H: keeps the Cholesky factorisation stable
BLOCK = 128


class Hessian:
    """``2 X^T X / n`` of a layer's inputs, accumulated batch by batch in float64."""

    def __init__(self, in_features: int, device: torch.device | str = "cpu") -> None:
        self.sum = torch.zeros(in_features, in_features, dtype=torch.float64, device=device)
        self.rows = 0

    def add(self, x: torch.Tensor) -> None:
        flat = x.reshape(-1, x.shape[-1]).double()
        self.sum += flat.T @ flat
        self.rows += flat.shape[0]

    def value(self) -> torch.Tensor:
        if self.rows == 0:
            raise ValueError("no calibration input reached this layer: GPTQ needs calibration data")
        return (2.0 / self.rows) * self.sum


def gptq(w: torch.Tensor, hessian: torch.Tensor, grid: Grid, *, damp: float = DAMP) -> QuantizedWeight:
    """Codes, scales and zeros of ``w`` (N, K) on ``grid`` that keep ``x W^T`` close on the calibration
    inputs whose Hessian is ``hessian`` (K, K)."""
    n, k = w.shape
    group = grid.group(k)
    grid.groups(k)  # refuses a group size that does not divide K
    block = max(group, BLOCK) if group < k else BLOCK
    if group < k:
        block -= block % group
    W = w.detach().double().clone()
    H = hessian.detach().double().clone()
    dead = torch.diag(H) == 0  # inputs that never fire: their weights do not matter
    H[dead, dead] = 1.0
    W[:, dead] = 0.0
    H += torch.eye(k, dtype=H.dtype, device=H.device) * (damp * torch.diag(H).mean())
    U = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)

    row = Grid(grid.bits, 0, grid.symmetric)  # one group per (sub-)row: a column, or one group's columns
    q = torch.zeros(n, k, dtype=torch.uint8, device=w.device)
    scales, zeros = [], []
    if group == k:
        s, z = minmax(W.float(), grid)
        scales, zeros = [s], [z]
    for a in range(0, k, block):
        b = min(a + block, k)
        W1, U1 = W[:, a:b].clone(), U[a:b, a:b]
        err = torch.zeros_like(W1)
        for i in range(b - a):
            col = a + i
            if group < k and col % group == 0:
                s, z = minmax(W1[:, i : i + group].float(), row)
                scales.append(s)
                zeros.append(z)
            s, z = scales[-1], zeros[-1]
            column = W1[:, i : i + 1]
            code = codes(column.float(), s, z, row)
            q[:, col : col + 1] = code
            e = (column - dequantize(code, s, z, row).double()) / U1[i, i]
            W1[:, i:] -= e @ U1[i : i + 1, i:]
            err[:, i : i + 1] = e
        W[:, b:] -= err @ U[a:b, b:]
    scale = torch.cat(scales, dim=1)
    zero = torch.cat(zeros, dim=1)
    return QuantizedWeight(q, scale, zero, grid)
