"""``PTQConverter``: post-training quantization of the trainer's GPT in one call.

Calibrated schemes run layer by layer in the order the model uses them: the calibration sequences are
embedded once, and through each block the inputs of each group of linears that share an input (q/k/v, then
o, then w1/w3, then w2) are captured, those linears quantized, and the sequences passed on through the
quantized layers, so each layer compensates the errors of the ones before it (GPTQ's sequential mode).
Schemes without calibration (rtn, hqq; dynamic fixed point given none) quantize every weight directly.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import torch
from torch import nn

from myolo.kernels.model.gpt import GPT, Block
from myolo.kernels.quantization.calibrate import CalibrationSet, CalibSource, calibration_set
from myolo.kernels.quantization.dfp import dynamic_fixed_point, fractional_length
from myolo.kernels.quantization.gptq import Hessian, gptq
from myolo.kernels.quantization.grid import Grid, QuantizedWeight, round_to_nearest
from myolo.kernels.quantization.hqq import hqq
from myolo.kernels.quantization.linear import QuantLinear
from myolo.kernels.quantization.spec import CALIBRATED, DEFAULT_LAYERS, SCHEMES, LayerSpec, QuantSpec, selected

STAGES: tuple[tuple[str, ...], ...] = (
    ("attention.wq", "attention.wk", "attention.wv"),
    ("attention.wo",),
    ("feed_forward.w1", "feed_forward.w3"),
    ("feed_forward.w2",),
)


@dataclass(frozen=True)
class LayerReport:
    """How far the quantized weight is from the float one (relative Frobenius error) and how long it took."""

    name: str
    shape: tuple[int, int]
    relative_error: float
    seconds: float


@dataclass
class Report:
    layers: list[LayerReport] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.layers)


class PTQConverter:
    """``PTQConverter(model=gpt, calib_dataset=..., bit_width=4, scheme="gptq").convert()`` -> a new GPT whose
    chosen linears are ``QuantLinear``; the source model is left as it was.

    ``group_size``: columns sharing a scale and zero (default 128 at 4 bits, whole rows at 8, where the grid is
    symmetric for the int8 kernel). ``layers``: glob patterns of the linears to quantize (default the blocks';
    ``layers=("layers.*", "output")`` adds the head). ``calib_dataset``: a token file, a tensor or an iterable
    of token batches; required by gptq, used by dynamic fixed point for its activation formats. ``device``:
    where the copy is quantized and calibrated (default the model's own); a GPU runs GPTQ's Hessians and
    solves many times faster than the CPU.
    """

    def __init__(
        self,
        model: GPT,
        calib_dataset: CalibSource | None = None,
        bit_width: int = 4,
        scheme: str = "dynamic_fixed_point",
        *,
        group_size: int | None = None,
        layers: tuple[str, ...] = DEFAULT_LAYERS,
        calib_sequences: int = 128,
        calib_seq_len: int = 256,
        model_name: str = "custom",
        model_args: dict | None = None,
        source_sha256: str | None = None,
        progress: Callable[[str], None] = lambda _: None,
        device: torch.device | str | None = None,
    ) -> None:
        if scheme not in SCHEMES:
            raise ValueError(f"scheme {scheme!r} is not one of {list(SCHEMES)}")
        if bit_width not in (4, 8):
            raise ValueError(f"bit_width must be 4 or 8, got {bit_width}")
        if scheme == "gptq" and calib_dataset is None:
            raise ValueError("scheme 'gptq' needs calib_dataset: it compensates errors on calibration inputs")
        self.model, self.scheme, self.bits = model, scheme, bit_width
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.group_size = (128 if bit_width == 4 else 0) if group_size is None else group_size
        self.symmetric = bit_width == 8 and scheme != "hqq"
        if scheme == "dynamic_fixed_point":
            self.group_size, self.symmetric = 0, True
        self.grid = Grid(bit_width, self.group_size, self.symmetric)
        self.patterns = layers
        self.cfg = model.cfg
        self.calib: CalibrationSet | None = None
        if calib_dataset is not None:
            self.calib = calibration_set(
                calib_dataset,
                vocab_size=self.cfg.vocab_size,
                max_seq_len=self.cfg.max_seq_len,
                seq_len=min(calib_seq_len, self.cfg.max_seq_len),
                max_sequences=calib_sequences,
            )
        self.model_name, self.model_args = model_name, dict(model_args or {})
        self.source_sha256 = source_sha256
        self.progress = progress
        self.report = Report()
        self.spec: QuantSpec | None = None
        self._check_layers()

    def convert(self) -> GPT:
        """The quantized copy; ``self.spec`` and ``self.report`` say what was done."""
        quant = copy.deepcopy(self.model).float().eval().to(self.device)
        specs: dict[str, LayerSpec] = {}
        with torch.no_grad():
            if self.calib is not None and self.scheme in CALIBRATED:
                self._sequential(quant, specs)
            else:
                for name, linear in self._targets(quant):
                    specs[name] = self._replace(quant, name, linear, None, None)
        self.spec = QuantSpec(
            scheme=self.scheme,  # type: ignore[arg-type]
            bits=self.bits,
            group_size=self.group_size,
            model=self.model_name,
            model_args=self.model_args,
            layers=specs,
            calib_sha256=self.calib.sha256 if self.calib else None,
            calib_tokens=self.calib.tokens if self.calib else 0,
            source_sha256=self.source_sha256,
        )
        return quant

    # ------------------------------------------------------------------ layer by layer
    def _sequential(self, model: GPT, specs: dict[str, LayerSpec]) -> None:
        assert self.calib is not None
        if model.tok_embeddings is None:
            raise ValueError("calibration needs the whole model (this one has no embedding: a pipeline stage)")
        hidden = [model.tok_embeddings(b.to(self.device)) for b in self.calib.batches]
        for index, block in model.layers.items():
            assert isinstance(block, Block)
            for stage in STAGES:
                names = [f"layers.{index}.{sub}" for sub in stage if selected(f"layers.{index}.{sub}", self.patterns)]
                if names:
                    stats = self._capture(model, names, partial(_through, block, hidden, model))
                    for name in names:
                        specs[name] = self._replace(model, name, _module(model, name), *stats[name])
                    self.progress(f"block {index}: {', '.join(stage)} quantized")
            hidden = _through(block, hidden, model)
        if selected("output", self.patterns) and model.output is not None and model.norm is not None:
            normed = [model.norm(h) for h in hidden]
            stats = self._capture(model, ["output"], lambda: [model.output(h) for h in normed])  # type: ignore[misc]
            specs["output"] = self._replace(model, "output", model.output, *stats["output"])

    def _capture(
        self, model: GPT, names: list[str], run: Callable[[], object]
    ) -> dict[str, tuple[Hessian | None, float | None]]:
        """Run ``run`` with the inputs of the linears ``names`` recorded: their Hessian (gptq) or max |x|."""
        hessians = (
            {n: Hessian(_module(model, n).in_features, self.device) for n in names} if self.scheme == "gptq" else {}
        )
        peaks = dict.fromkeys(names, 0.0)
        hooks = []
        for n in names:

            def hook(_: nn.Module, args: tuple[torch.Tensor, ...], n: str = n) -> None:
                x = args[0].detach().float()
                if n in hessians:
                    hessians[n].add(x)
                peaks[n] = max(peaks[n], float(x.abs().max()))

            hooks.append(_module(model, n).register_forward_pre_hook(hook))
        try:
            run()
        finally:
            for h in hooks:
                h.remove()
        return {n: (hessians.get(n), peaks[n]) for n in names}

    # ------------------------------------------------------------------ one linear
    def _replace(
        self, model: GPT, name: str, linear: nn.Linear, hessian: Hessian | None, peak: float | None
    ) -> LayerSpec:
        began = time.perf_counter()
        w = linear.weight.detach().float()
        qw = self._quantize(w, hessian)
        act_fl = None
        if self.scheme == "dynamic_fixed_point" and peak is not None:
            act_fl = fractional_length(peak, self.bits)
        layer = QuantLinear.of(qw, act_bits=self.bits if act_fl is not None else None, act_fl=act_fl).to(w.device)
        _set_module(model, name, layer)
        error = float((qw.dequantize() - w).norm() / w.norm().clamp_min(1e-12))
        n, k = qw.shape
        self.report.layers.append(LayerReport(name, (n, k), error, time.perf_counter() - began))
        return LayerSpec(
            shape=(n, k),
            bits=self.bits,
            group_size=qw.grid.group_size,
            symmetric=qw.grid.symmetric,
            act_bits=layer.act_bits,
            act_fl=act_fl,
        )

    def _quantize(self, w: torch.Tensor, hessian: Hessian | None) -> QuantizedWeight:
        if self.scheme == "gptq":
            assert hessian is not None
            return gptq(w, hessian.value(), self.grid)
        if self.scheme == "hqq":
            return hqq(w, self.grid)
        if self.scheme == "dynamic_fixed_point":
            return dynamic_fixed_point(w, self.bits)
        return round_to_nearest(w, self.grid)

    def _targets(self, model: nn.Module) -> list[tuple[str, nn.Linear]]:
        return [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear) and selected(n, self.patterns)]

    def _check_layers(self) -> None:
        targets = self._targets(self.model)
        if not targets:
            raise ValueError(f"no linear layer matches layers={list(self.patterns)}: nothing would be quantized")
        for name, linear in targets:
            if self.group_size and linear.in_features % self.group_size:
                fits = [g for g in (32, 64, 128, 256) if linear.in_features % g == 0]
                raise ValueError(
                    f"group_size {self.group_size} does not divide layer {name}'s {linear.in_features} input "
                    f"features: use one of {fits or 'none of 32..256'}, or 0 for whole rows"
                )


def _through(block: nn.Module, hidden: list[torch.Tensor], model: GPT) -> list[torch.Tensor]:
    return [block(h, model.rope_cos, model.rope_sin) for h in hidden]


def _module(model: nn.Module, name: str) -> nn.Module:
    return model.get_submodule(name)


def _set_module(model: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, child, module)


@torch.no_grad()
def dequantize_model(model: nn.Module) -> nn.Module:
    """Turn every quantized layer of ``model`` back into a float ``nn.Linear`` holding the weight it computes
    with, in place: what reads or edits weights (the watermark's verifier, an attack in its benchmark) then
    sees a plain model."""
    for name, module in list(model.named_modules()):
        if isinstance(module, QuantLinear):
            linear = nn.Linear(module.in_features, module.out_features, bias=False, device=module.qweight.device)
            linear.weight.copy_(module.dequantized(torch.float32))
            _set_module(model, name, linear)
    return model
