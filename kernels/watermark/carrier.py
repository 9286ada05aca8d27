"""Which weights carry the mark, and how they project onto its bits.

The carriers are feed-forward matrices of the blocks (``layers.<i>.feed_forward.w{1,2,3}``), a key-chosen share
of them in a key-chosen order, up to ``max_coords`` weights in all. Every carrier weight is given to one bit
and a sign, from the key: a random permutation of the weights, dealt round-robin to the bits, so each bit owns
``max_coords / bits`` weights, and no two bits share one. A bit's projection is the signed sum of its weights
over their norm, ``z_i = sum_j s_j w_j / sqrt(sum_j w_j^2)``: a count sketch rather than a dense Gaussian matrix.
It costs one index and one sign per weight instead of ``bits`` floats, and it makes the null exact: with signs
drawn independently of the weights, each ``z_i`` of an unmarked model is positive with probability 1/2 and the
bits are independent (their supports are disjoint), so the matched bits of an unmarked model or a wrong key
follow Binomial(bits, 1/2) whatever the weights are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from myolo.kernels.watermark.secret import WatermarkKey

CANDIDATE = re.compile(r"^layers\.(\d+)\.feed_forward\.(w1|w2|w3)$")


@dataclass(frozen=True)
class CarrierPlan:
    """The key's choice for one model shape: carrier modules in order, and each carrier weight's bit and sign."""

    modules: tuple[str, ...]
    sizes: tuple[int, ...]  # weights used of each module (the last may be cut at max_coords)
    bit_of: torch.Tensor  # int64 (coords,)
    sign: torch.Tensor  # float32 (coords,) of +-1
    bits: int

    @property
    def coords(self) -> int:
        return int(self.bit_of.numel())


def candidates(model: nn.Module) -> list[str]:
    """The feed-forward modules of ``model`` that may carry the mark, in block order."""
    return sorted((name for name, _ in model.named_modules() if CANDIDATE.match(name)), key=_order)


def _order(name: str) -> tuple[int, str]:
    match = CANDIDATE.match(name)
    assert match is not None
    return int(match.group(1)), match.group(2)


def weight_of(model: nn.Module, name: str) -> torch.Tensor:
    """The weight of the Linear ``name`` (a quantized model is read after ``dequantize_model``)."""
    module = model.get_submodule(name)
    if not isinstance(module, nn.Linear):
        raise TypeError(f"{name} is a {type(module).__name__}, not a Linear: dequantize the model first")
    return module.weight


def plan(key: WatermarkKey, model: nn.Module, bits: int, share: float, max_coords: int) -> CarrierPlan:
    """The carriers of ``model`` for ``key``: ``share`` of the candidates (at least one), in key order."""
    names = candidates(model)
    if not names:
        raise ValueError("the model has no feed-forward layers (layers.<i>.feed_forward.w1/w2/w3) to carry a mark")
    ranked = sorted(names, key=lambda n: key.derive(f"carrier:{n}"))
    chosen = ranked[: max(1, round(share * len(ranked)))]
    modules, sizes, total = [], [], 0
    for name in chosen:
        if total >= max_coords:
            break
        w = weight_of(model, name)
        take = min(w.numel(), max_coords - total)
        modules.append(name)
        sizes.append(take)
        total += take
    if total < 4 * bits:
        raise ValueError(f"the carriers hold {total} weights, too few for {bits} bits (>= {4 * bits} needed)")
    order = np.argsort(key.uniform64("assign", total), kind="stable")
    bit_of = np.empty(total, dtype=np.int64)
    bit_of[order] = np.arange(total, dtype=np.int64) % bits
    sign = key.bits("sign", total).astype(np.float32) * 2.0 - 1.0
    return CarrierPlan(tuple(modules), tuple(sizes), torch.from_numpy(bit_of), torch.from_numpy(sign), bits)


def bit_sums(parts: list[nn.Module], p: CarrierPlan) -> tuple[torch.Tensor, torch.Tensor]:
    """Each bit's signed sum of its weights and their sum of squares, over the carriers ``parts`` hold (a whole
    model holds them all; a pipeline stage some: sums of stages add up). Differentiable; a sharded parameter
    of a parallel run is gathered first (its gather is differentiable too). Sums are on the parts' device."""
    device = next((t.device for part in parts for t in part.parameters()), torch.device("cpu"))
    z = torch.zeros(p.bits, device=device)
    sq = torch.zeros(p.bits, device=device)
    offset = 0
    for name, size in zip(p.modules, p.sizes, strict=True):
        for part in parts:
            try:
                w = weight_of(part, name)
            except AttributeError:
                continue  # on another stage
            if isinstance(w, torch.distributed.tensor.DTensor):
                w = w.full_tensor()
            flat = w.reshape(-1)[:size].float()
            bits = p.bit_of[offset : offset + size].to(flat.device)
            z = z.index_add(0, bits, p.sign[offset : offset + size].to(flat.device) * flat)
            sq = sq.index_add(0, bits, flat * flat)
        offset += size
    return z, sq


def projections(z: torch.Tensor, sq: torch.Tensor) -> torch.Tensor:
    """``z_i`` of every bit from its sums: the signed sum over the weights' norm (scale-free, N(0, 1)-like
    when unmarked)."""
    return z / sq.clamp_min(1e-30).sqrt()
