"""A linear layer with a quantized weight, run by torch's packed kernels where one fits the grid and device.

Kernels, chosen once per device and dtype and kept:
- ``int8``: 8-bit symmetric codes, one scale per output row: ``torch._weight_int8pack_mm`` (int8 weights,
  float activations);
- ``int4``: 4-bit asymmetric groups of 32..256 columns: ``torch._weight_int4pack_mm_for_cpu`` on the CPU,
  ``torch._weight_int4pack_mm`` (bfloat16) on CUDA, each after its own repacking of the codes;
- ``dequant``: anything else (dynamic fixed point, other widths, a kernel the build lacks): the weight is
  dequantized once to the activations' dtype and a plain matmul runs. Correct everywhere, and as fast as float.
A call with more than ``PACKED_MAX_ROWS`` rows dequantizes the weight into a temporary and runs one float
matmul whatever the kernel (the layer's memory stays packed): the packed kernels are built for decode, and on
an H200 the CUDA int4 kernel took 20x the float matmul's time at 512 rows. The CPU packed kernels take their
activations in bfloat16 (``cpu_dtype``), whatever the model's dtype: they are vectorised for it, and with
float32 activations they fall back to a far slower path (figures in docs/quantization.md).
The module's buffers are the file's tensors (``myolo.kernels.quantization.file``): codes packed two per byte at 4
bits, scales and zeros in bfloat16, so ``state_dict`` is what is saved.
"""

from __future__ import annotations

import structlog
import torch
import torch.nn.functional as F
from torch import nn

from myolo.kernels.quantization.dfp import quantize_activation
from myolo.kernels.quantization.grid import PARAM_DTYPE, Grid, QuantizedWeight, dequantize, pack4, unpack4

log = structlog.get_logger("myolo.kernels.quantization")
INT4_GROUPS = (32, 64, 128, 256)
# The packed kernels serve decode (a few rows). A prefill's or a calibration's many rows go through the
# dequantized weight in the model's own dtype: faster on a GPU, about as fast on the CPU, and exact, so an
# evaluation measures the weights' rounding and not that of bfloat16 activations.
PACKED_MAX_ROWS = 8


class QuantLinear(nn.Module):
    """``y = x W^T`` with ``W`` on ``grid``; ``act_fl`` set: inputs rounded to ``act_bits`` fixed point first.
    ``cpu_dtype``: the activations' dtype in the CPU packed kernels (see the module's docstring)."""

    cpu_dtype: torch.dtype = torch.bfloat16

    def __init__(
        self,
        in_features: int,
        out_features: int,
        grid: Grid,
        *,
        act_bits: int | None = None,
        act_fl: int | None = None,
    ) -> None:
        super().__init__()
        self.in_features, self.out_features, self.grid = in_features, out_features, grid
        self.act_bits, self.act_fl = act_bits, act_fl
        groups = grid.groups(in_features)
        width = in_features // 2 if grid.bits == 4 else in_features
        self.register_buffer("qweight", torch.zeros(out_features, width, dtype=torch.uint8))
        self.register_buffer("scales", torch.ones(out_features, groups, dtype=PARAM_DTYPE))
        self.register_buffer("zeros", torch.zeros(out_features, groups, dtype=PARAM_DTYPE))
        self._kernels: dict[tuple[str, torch.dtype], tuple[str, object]] = {}

    @classmethod
    def of(cls, qw: QuantizedWeight, *, act_bits: int | None = None, act_fl: int | None = None) -> QuantLinear:
        n, k = qw.shape
        layer = cls(k, n, qw.grid, act_bits=act_bits, act_fl=act_fl)
        layer.qweight.copy_(pack4(qw.q) if qw.grid.bits == 4 else qw.q)
        layer.scales.copy_(qw.scale)
        layer.zeros.copy_(qw.zero)
        return layer

    def codes(self) -> torch.Tensor:
        return unpack4(self.qweight) if self.grid.bits == 4 else self.qweight

    def weight(self) -> QuantizedWeight:
        return QuantizedWeight(self.codes(), self.scales, self.zeros, self.grid)

    def dequantized(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return dequantize(self.codes(), self.scales, self.zeros, self.grid, dtype)

    def kernel(self, device: torch.device, dtype: torch.dtype) -> str:
        """The kernel ``forward`` runs for inputs on ``device`` in ``dtype``."""
        return self._prepared(device, dtype)[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.act_fl is not None and self.act_bits is not None:
            x = quantize_activation(x, self.act_fl, self.act_bits)
        name, prepared = self._prepared(x.device, x.dtype)
        flat = x.reshape(-1, self.in_features)
        if name != "dequant" and flat.shape[0] > PACKED_MAX_ROWS:
            return F.linear(x, self.dequantized(x.dtype).to(x.device))
        if name == "int8":
            w, s = prepared  # type: ignore[misc]
            y = torch._weight_int8pack_mm(flat.to(self.cpu_dtype).contiguous(), w, s).to(x.dtype)
        elif name == "int4-cpu":
            w, sz = prepared  # type: ignore[misc]
            y = torch._weight_int4pack_mm_for_cpu(flat.to(self.cpu_dtype).contiguous(), w, self._group, sz).to(x.dtype)
        elif name == "int4-cuda":
            w, sz = prepared  # type: ignore[misc]
            y = torch._weight_int4pack_mm(flat.to(torch.bfloat16).contiguous(), w, self._group, sz).to(x.dtype)
        else:
            y = F.linear(flat, prepared)  # type: ignore[arg-type]
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bits={self.grid.bits}, "
            f"group_size={self._group}, symmetric={self.grid.symmetric}"
            + (f", act_bits={self.act_bits}, act_fl={self.act_fl}" if self.act_fl is not None else "")
        )

    @property
    def _group(self) -> int:
        return self.grid.group(self.in_features)

    def _apply(self, fn, recurse=True):  # type: ignore[no-untyped-def]
        self._kernels.clear()  # moved or cast: the prepared tensors are stale
        return super()._apply(fn, recurse)

    def _cpu_kernel_shape(self) -> bool:
        """The CPU kernels' vector paths want whole blocks: a narrow layer (fewer than 64 inputs, or outputs not
        a multiple of 16) gave a wrong result on this CPU depending on what ran before it (a tail read past
        the row), so it runs the dequantized weight."""
        return self.in_features % 64 == 0 and self.out_features % 16 == 0

    def _prepared(self, device: torch.device, dtype: torch.dtype) -> tuple[str, object]:
        key = (str(device), dtype)
        if key not in self._kernels:
            self._kernels[key] = self._prepare(device, dtype)
            if self._kernels[key][0] != "dequant":
                try:  # a kernel that refuses this shape does so on its first call: find out now
                    self.forward(torch.zeros(1, self.in_features, device=device, dtype=dtype))
                except (RuntimeError, NotImplementedError) as exc:
                    log.warning("packed kernel refused the layer; dequantized matmul", layer=self.extra_repr(),
                                error=str(exc))  # fmt: skip
                    self._kernels[key] = ("dequant", self.dequantized(dtype).to(device))
        return self._kernels[key]

    def _prepare(self, device: torch.device, dtype: torch.dtype) -> tuple[str, object]:
        g, group = self.grid, self._group
        try:
            if device.type == "cpu" and not self._cpu_kernel_shape():
                return "dequant", self.dequantized(dtype).to(device)
            if g.bits == 8 and g.symmetric and group == self.in_features and device.type == "cpu":
                w = (self.qweight.to(device, torch.int16) - g.mid).to(torch.int8).contiguous()
                return "int8", (w, self.scales[:, 0].to(device, self.cpu_dtype).contiguous())
            if g.bits == 4 and not g.symmetric and group in INT4_GROUPS:
                sz = torch.stack((self.scales.T, self.zeros.T), dim=-1)
                codes = self.codes().to(device)
                if device.type == "cpu":
                    w = torch._convert_weight_to_int4pack_for_cpu(codes.to(torch.int32).contiguous(), 1)
                    return "int4-cpu", (w, sz.to(device, self.cpu_dtype).contiguous())
                if device.type == "cuda":
                    pairs = ((codes[:, 0::2] << 4) | codes[:, 1::2]).to(torch.uint8).contiguous()
                    w = torch._convert_weight_to_int4pack(pairs, 8)
                    return "int4-cuda", (w, sz.to(device, torch.bfloat16).contiguous())
        except (RuntimeError, NotImplementedError) as exc:
            log.warning("packed kernel unavailable; dequantized matmul", layer=self.extra_repr(), error=str(exc))
        return "dequant", self.dequantized(dtype).to(device)
