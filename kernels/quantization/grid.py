"""The integer grid a weight is rounded onto, and the one representation every scheme produces.

A quantized weight (N, K) is ``q`` (uint8 codes in 0..2^bits - 1), and per row and group of ``group_size``
input columns a ``scale`` and a ``zero``: ``w ~ (q - mid) * scale + zero`` with ``mid = 2^(bits-1)``. That is
the convention of torch's CPU int4 kernel, and with ``zero = 0`` the symmetric grid of its int8 kernel (codes
``q - 128`` as int8), so each scheme only chooses ``q``, ``scale`` and ``zero`` and the kernels need no
conversion of meaning. Scales and zeros are stored in bfloat16 (the file's size counts them); codes are always
chosen against the rounded values, so what the file holds is exactly what was optimised.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

PARAM_DTYPE = torch.bfloat16


@dataclass(frozen=True)
class Grid:
    """``bits`` 2..8; ``group_size`` input columns share a scale and zero (0: the whole row); ``symmetric``
    keeps zero at 0 (what the int8 kernel needs)."""

    bits: int
    group_size: int = 0
    symmetric: bool = False

    def __post_init__(self) -> None:
        if not 2 <= self.bits <= 8:
            raise ValueError(f"bits must be in 2..8, got {self.bits}")
        if self.group_size < 0:
            raise ValueError(f"group_size must be >= 0 (0: one group per row), got {self.group_size}")

    @property
    def levels(self) -> int:
        return (1 << self.bits) - 1

    @property
    def mid(self) -> int:
        return 1 << (self.bits - 1)

    def groups(self, in_features: int) -> int:
        size = self.group(in_features)
        if in_features % size:
            raise ValueError(f"group_size {size} does not divide the layer's {in_features} input features")
        return in_features // size

    def group(self, in_features: int) -> int:
        return self.group_size or in_features


@dataclass(frozen=True)
class QuantizedWeight:
    """Codes (N, K) uint8, scale and zero (N, groups) in ``PARAM_DTYPE``, on the grid ``grid``."""

    q: torch.Tensor
    scale: torch.Tensor
    zero: torch.Tensor
    grid: Grid

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.q.shape[0]), int(self.q.shape[1])

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return dequantize(self.q, self.scale, self.zero, self.grid, dtype)

    def bytes(self) -> int:
        """What it takes on disk: codes packed to ``bits`` (two 4-bit codes a byte), scales and zeros."""
        n, k = self.shape
        codes = n * k * self.grid.bits // 8 if self.grid.bits == 4 else n * k
        return codes + self.scale.numel() * self.scale.element_size() + self.zero.numel() * self.zero.element_size()


def _grouped(t: torch.Tensor, group: int) -> torch.Tensor:
    """(N, K) -> (N, K / group, group): each group's columns together, a view (no copy)."""
    return t.reshape(t.shape[0], t.shape[1] // group, group)


def codes(w: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, grid: Grid) -> torch.Tensor:
    """The nearest codes of ``w`` (N, K) for per-group ``scale`` and ``zero`` (N, groups)."""
    group = grid.group(w.shape[1])
    s, z = scale.float().unsqueeze(2), zero.float().unsqueeze(2)
    q = torch.clamp(torch.round((_grouped(w.float(), group) - z) / s) + grid.mid, 0, grid.levels)
    return q.to(torch.uint8).reshape(w.shape)


def dequantize(
    q: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, grid: Grid, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """``(q - mid) * scale + zero`` per group, computed in ``dtype`` (broadcast: no per-column copies)."""
    group = grid.group(q.shape[1])
    s, z = scale.to(dtype).unsqueeze(2), zero.to(dtype).unsqueeze(2)
    return torch.addcmul(z, _grouped(q, group).to(dtype) - grid.mid, s).reshape(q.shape)


def minmax(w: torch.Tensor, grid: Grid) -> tuple[torch.Tensor, torch.Tensor]:
    """Per group, the scale and zero that map the group's range onto the grid (rounded to ``PARAM_DTYPE``):
    min..max asymmetric, or -max|w|..max|w| symmetric."""
    n, k = w.shape
    g = w.float().reshape(n, grid.groups(k), grid.group(k))
    if grid.symmetric:
        top = g.abs().amax(dim=2)
        scale = top / (grid.mid - 1)
        zero = torch.zeros_like(scale)
    else:
        lo, hi = g.amin(dim=2), g.amax(dim=2)
        scale = (hi - lo) / grid.levels
        zero = lo + grid.mid * scale
    scale = torch.where(scale > 0, scale, torch.full_like(scale, 1e-8))
    return scale.to(PARAM_DTYPE), zero.to(PARAM_DTYPE)


def round_to_nearest(w: torch.Tensor, grid: Grid) -> QuantizedWeight:
    """The plain scheme: each group's range, each weight to its nearest code."""
    scale, zero = minmax(w, grid)
    return QuantizedWeight(codes(w, scale, zero, grid), scale, zero, grid)


def pack4(q: torch.Tensor) -> torch.Tensor:
    """(N, K) codes 0..15 -> (N, K/2) bytes, column 2j in the low nibble, 2j+1 in the high one."""
    if q.shape[1] % 2:
        raise ValueError(f"4-bit codes pack in pairs: {q.shape[1]} columns is odd")
    q = q.to(torch.uint8)
    return (q[:, 0::2] | (q[:, 1::2] << 4)).contiguous()


def unpack4(packed: torch.Tensor) -> torch.Tensor:
    low, high = packed & 0x0F, packed >> 4
    return torch.stack((low, high), dim=2).reshape(packed.shape[0], -1)
