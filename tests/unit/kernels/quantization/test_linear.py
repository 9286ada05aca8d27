"""The packed kernels compute what the dequantized weight computes, within a stated bound."""

from __future__ import annotations

import pytest
import torch

from myolo.kernels.quantization.dfp import dynamic_fixed_point
from myolo.kernels.quantization.grid import Grid, round_to_nearest
from myolo.kernels.quantization.linear import QuantLinear

# fp32: the kernels accumulate in another order than the reference matmul: 1e-5 of the output's scale;
# bf16: activations and products in bfloat16 (8 bits of mantissa): 2 % of it
BOUND = {torch.float32: 1e-5, torch.bfloat16: 2e-2}


def layer(bits: int, group: int, symmetric: bool = False, n: int = 96, k: int = 256) -> QuantLinear:
    w = torch.randn(n, k, generator=torch.Generator().manual_seed(0)) * 0.05
    return QuantLinear.of(round_to_nearest(w, Grid(bits, group, symmetric)))


@pytest.mark.parametrize("cpu_dtype", [torch.float32, torch.bfloat16], ids=["fp32-kernel", "bf16-kernel"])
@pytest.mark.parametrize(
    ("bits", "group", "symmetric", "kernel"),
    [(8, 0, True, "int8"), (4, 32, False, "int4-cpu"), (4, 64, False, "int4-cpu"), (4, 128, False, "int4-cpu")],
)
def test_packed_kernels_equal_the_dequantized_reference(monkeypatch, cpu_dtype, bits, group, symmetric, kernel) -> None:
    """The kernels compute in ``cpu_dtype`` (bfloat16 by default, where they are fast): within 1e-5 of the
    output's scale when they are given float32, 2 % in bfloat16; the model's float32 comes back float32."""
    monkeypatch.setattr(QuantLinear, "cpu_dtype", cpu_dtype)
    lin = layer(bits, group, symmetric)
    assert lin.kernel(torch.device("cpu"), torch.float32) == kernel
    # decode-sized calls run the packed kernel; a prefill's many rows the dequantized weight (float32 exact)
    for shape in [(1, 1, 256), (2, 4, 256), (3, 5, 256)]:
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
        got = lin(x)
        ref = x @ lin.dequantized().T
        bound = BOUND[cpu_dtype] if shape[0] * shape[1] <= 8 else BOUND[torch.float32]
        assert got.shape == (*shape[:2], 96) and got.dtype == torch.float32
        assert float((got - ref).abs().max()) <= bound * float(ref.abs().max()), shape


def test_decode_calls_use_the_packed_kernel(monkeypatch) -> None:
    lin = layer(4, 64)
    calls = []
    real = torch._weight_int4pack_mm_for_cpu
    monkeypatch.setattr(torch, "_weight_int4pack_mm_for_cpu", lambda *a: calls.append(a[0].shape) or real(*a))
    lin(torch.randn(1, 256))
    lin(torch.randn(64, 256))
    assert calls[-1] == (1, 256) and (64, 256) not in calls


def test_grids_without_a_kernel_run_the_dequantized_weight() -> None:
    w = torch.randn(32, 64) * 0.1
    lin = QuantLinear.of(dynamic_fixed_point(w, 4))
    assert lin.kernel(torch.device("cpu"), torch.float32) == "dequant"
    x = torch.randn(4, 64)
    assert torch.allclose(lin(x), x @ lin.dequantized().T)
    odd = layer(4, 96, n=32, k=192)  # a group size the int4 kernel does not take
    assert odd.kernel(torch.device("cpu"), torch.float32) == "dequant"


def test_the_buffers_are_the_packed_codes_and_bfloat16_parameters() -> None:
    lin = layer(4, 64)
    state = lin.state_dict()
    assert state["qweight"].shape == (96, 128) and state["qweight"].dtype == torch.uint8
    assert state["scales"].shape == (96, 4) and state["scales"].dtype == torch.bfloat16
    assert lin.weight().bytes() == 96 * 128 + 2 * 96 * 4 * 2


def test_activation_rounding_applies_before_the_matmul() -> None:
    w = torch.eye(8)
    lin = QuantLinear.of(dynamic_fixed_point(w, 8), act_bits=4, act_fl=2)
    assert lin.kernel(torch.device("cpu"), torch.float32) == "dequant"  # 8 inputs: too narrow for the kernels
    assert lin(torch.tensor([[0.26, 5.0, 0, 0, 0, 0, 0, 0]])).tolist()[0][:2] == [0.25, 1.75]
