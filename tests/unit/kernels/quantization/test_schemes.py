"""The grid's round trip bounds, and what each scheme is for: GPTQ beats plain rounding on its loss, HQQ on
an outlier-heavy weight, dynamic fixed point uses one power-of-two step."""

from __future__ import annotations

import pytest
import torch

from myolo.kernels.quantization.dfp import dynamic_fixed_point, fractional_length, quantize_activation
from myolo.kernels.quantization.gptq import Hessian, gptq
from myolo.kernels.quantization.grid import Grid, pack4, round_to_nearest, unpack4
from myolo.kernels.quantization.hqq import hqq


def weight(n: int = 64, k: int = 256, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, k, generator=torch.Generator().manual_seed(seed)) * 0.02


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("group", [32, 64, 128, 0])
def test_round_to_nearest_is_within_half_a_step_of_each_weight(bits: int, group: int) -> None:
    w = weight()
    grid = Grid(bits, group)
    qw = round_to_nearest(w, grid)
    step = qw.scale.float().repeat_interleave(grid.group(256), dim=1)
    # half a step, plus the bfloat16 rounding of scale and zero (relative 2^-8 of the group's range)
    assert bool(((qw.dequantize() - w).abs() <= step * (0.5 + grid.levels * 2**-8) + 1e-7).all())
    assert qw.q.dtype == torch.uint8 and int(qw.q.max()) <= grid.levels


def test_symmetric_grids_keep_zero_at_zero_and_represent_zero_exactly() -> None:
    w = weight()
    qw = round_to_nearest(w, Grid(8, 0, symmetric=True))
    assert bool((qw.zero == 0).all())
    assert bool((qw.dequantize()[torch.zeros_like(w).bool()] == 0).all())
    assert int(qw.q.min()) >= 1  # -127..127 around 128: the int8 kernel's range


def test_4_bit_codes_pack_two_a_byte_and_unpack_to_the_same() -> None:
    q = torch.randint(0, 16, (8, 32), dtype=torch.uint8)
    packed = pack4(q)
    assert packed.shape == (8, 16) and bool((unpack4(packed) == q).all())
    with pytest.raises(ValueError, match="odd"):
        pack4(q[:, :31])


def test_a_group_that_does_not_divide_the_layer_is_refused() -> None:
    with pytest.raises(ValueError, match="group_size 96 does not divide the layer's 256 input features"):
        round_to_nearest(weight(), Grid(4, 96))


def correlated_inputs(k: int, rows: int = 2048, seed: int = 1) -> torch.Tensor:
    """Inputs whose features move together (what real activations do): a low-rank mix plus a little noise."""
    gen = torch.Generator().manual_seed(seed)
    basis = torch.randn(16, k, generator=gen)
    return torch.randn(rows, 16, generator=gen) @ basis + 0.1 * torch.randn(rows, k, generator=gen)


@pytest.mark.parametrize("group", [64, 128, 0])
def test_gptq_beats_round_to_nearest_on_the_layer_output_it_minimises(group: int) -> None:
    w, x = weight(), correlated_inputs(256)
    h = Hessian(256)
    h.add(x[:1024])
    grid = Grid(4, group)
    held = x[1024:]  # judged on inputs it did not see
    exact = held @ w.T
    rtn_err = float(((held @ round_to_nearest(w, grid).dequantize().T) - exact).pow(2).mean())
    gptq_err = float(((held @ gptq(w, h.value(), grid).dequantize().T) - exact).pow(2).mean())
    assert gptq_err < 0.5 * rtn_err, (gptq_err, rtn_err)


def test_gptq_without_calibration_input_says_so() -> None:
    with pytest.raises(ValueError, match="GPTQ needs calibration data"):
        Hessian(8).value()


def test_gptq_ignores_inputs_that_never_fire() -> None:
    w, x = weight(k=64), correlated_inputs(64)
    x[:, 5] = 0.0
    h = Hessian(64)
    h.add(x)
    qw = gptq(w, h.value(), Grid(4, 32))
    assert torch.isfinite(qw.dequantize()).all()


def test_hqq_beats_round_to_nearest_when_outliers_stretch_the_groups() -> None:
    w = weight()
    w[torch.rand(w.shape, generator=torch.Generator().manual_seed(3)) < 0.01] *= 12  # heavy tails
    grid = Grid(4, 64)
    rtn = (round_to_nearest(w, grid).dequantize() - w).abs()
    opt = (hqq(w, grid).dequantize() - w).abs()
    # HQQ's objective: the l_0.7 error (most weights close, outliers allowed to miss)
    assert float(opt.pow(0.7).mean()) < float(rtn.pow(0.7).mean())
    assert float(opt.median()) < float(rtn.median())


def test_dynamic_fixed_point_uses_one_power_of_two_step_per_layer() -> None:
    w = weight()
    w[0, 0] = 0.3  # max |w| = 0.3 needs no integer bit: 2^-2 <= 0.3 < 2^-1, so fl = bits - 1 + 1
    assert fractional_length(0.3, 8) == 8
    qw = dynamic_fixed_point(w, 8)
    assert bool((qw.scale.float() == 2.0**-8).all())
    assert float((qw.dequantize() - w).abs().max()) <= 2.0**-9 + 1e-9
    x = torch.tensor([0.26, -3.0, 1.5])
    assert quantize_activation(x, fractional_length(1.5, 4), 4).tolist() == [0.25, -2.0, 1.5]
