"""The quantized model file: deterministic safetensors with packed codes, scales, zeros and a metadata block.

Tensors: each quantized linear's ``<name>.qweight`` (uint8, two 4-bit codes a byte), ``<name>.scales`` and
``<name>.zeros`` (bfloat16, one per row and group), and every other weight as it was (norms, embeddings, the
head unless quantized). Metadata: the export's (``myolo.model``, ``myolo.model_args``, ``myolo.step``) and
``myolo.quant``, a ``QuantSpec`` as JSON (scheme, bits, group size, each layer's grid, the calibration data's
and the source file's SHA-256). Loading trusts none of it: the spec must decode, name the file's model, and
match every layer of that model; every tensor must be there with its shape and dtype, and nothing else.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import msgspec
import torch

from myolo.events.payloads.models import Watermark
from myolo.kernels.export.weights import (
    META_MODEL,
    WeightsError,
    WrittenWeights,
    check_compatible,
    describe_model,
    read_weights,
    weights_metadata,
    write_weights,
)
from myolo.kernels.model import GPT, ModelConfig, preset
from myolo.kernels.quantization.grid import Grid
from myolo.kernels.quantization.linear import QuantLinear
from myolo.kernels.quantization.spec import FORMAT, META_QUANT, QuantSpec
from myolo.kernels.watermark.header import with_watermark


def save_quantized(
    model: GPT, spec: QuantSpec, path: str | os.PathLike[str], *, step: int = 0, watermark: Watermark | None = None
) -> WrittenWeights:
    """Write ``model`` (a ``PTQConverter`` result) and its ``spec`` to ``path`` atomically; ``watermark``: the
    mark its source names, named again."""
    metadata = weights_metadata(spec.model, step, spec.model_args)
    metadata[META_QUANT] = msgspec.json.encode(spec).decode()
    return write_weights(model.state_dict(), path, with_watermark(metadata, watermark))


def read_spec(metadata: Mapping[str, str], source: str) -> QuantSpec:
    raw = metadata.get(META_QUANT)
    if raw is None:
        raise WeightsError(f"{source} is not a quantized model: its metadata has no {META_QUANT}")
    try:
        spec = msgspec.json.decode(raw, type=QuantSpec)
    except msgspec.ValidationError as exc:
        raise WeightsError(f"{source}: metadata {META_QUANT} is invalid: {exc}") from None
    except msgspec.DecodeError as exc:
        raise WeightsError(f"{source}: metadata {META_QUANT} is not JSON: {exc}") from None
    if spec.format != FORMAT:
        raise WeightsError(f"{source}: {META_QUANT}.format is {spec.format}; this version reads format {FORMAT}")
    if metadata.get(META_MODEL) != spec.model:
        raise WeightsError(
            f"{source}: {META_MODEL} says {metadata.get(META_MODEL)!r} but {META_QUANT}.model {spec.model!r}"
        )
    return spec


def shell(spec: QuantSpec, source: str) -> tuple[GPT, ModelConfig]:
    """The spec's model with each quantized layer an empty ``QuantLinear`` of the spec's grid."""
    try:
        cfg = preset(spec.model, **spec.model_args)
    except ValueError as exc:
        raise WeightsError(f"{source}: {META_QUANT}.model_args: {exc}") from None
    model = GPT(cfg)
    for name, layer in spec.layers.items():
        try:
            linear = model.get_submodule(name)
        except AttributeError:
            raise WeightsError(
                f"{source}: {META_QUANT}.layers names {name!r}, which model {describe_model(spec.model, spec.model_args)} "
                "does not have"
            ) from None
        if not isinstance(linear, torch.nn.Linear):
            raise WeightsError(f"{source}: {META_QUANT}.layers[{name!r}] is not a linear layer of the model")
        out_f, in_f = linear.weight.shape
        if tuple(layer.shape) != (out_f, in_f):
            raise WeightsError(
                f"{source}: {META_QUANT}.layers[{name!r}].shape is {list(layer.shape)} but the model's layer is "
                f"{[out_f, in_f]}"
            )
        try:
            grid = Grid(layer.bits, layer.group_size, layer.symmetric)
            quant = QuantLinear(in_f, out_f, grid, act_bits=layer.act_bits, act_fl=layer.act_fl)
        except ValueError as exc:
            raise WeightsError(f"{source}: {META_QUANT}.layers[{name!r}]: {exc}") from None
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, child, quant)
    return model, cfg


def load_quantized(
    path: str | os.PathLike[str],
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    expect: Mapping[str, Any] | None = None,
) -> tuple[GPT, ModelConfig, QuantSpec]:
    """The quantized model of ``path`` on ``device``, its float weights in ``dtype``. ``expect``: model and
    model_args the caller requires (``{"model": "small"}``); a file of another model is refused naming it."""
    source = str(path)
    tensors, metadata = read_weights(path)
    spec = read_spec(metadata, source)
    for key, want in (expect or {}).items():
        have = getattr(spec, key)
        if want is not None and have != want:
            raise WeightsError(f"{source} was quantized from {key} {have!r}, not the {want!r} asked for")
    model, cfg = shell(spec, source)
    expected = model.state_dict()
    check_compatible(
        {n: t.shape for n, t in expected.items()}, {n: t.shape for n, t in tensors.items()}, source, spec.model
    )
    for name, want in expected.items():
        got = tensors[name]
        kind_differs = got.is_floating_point() != want.is_floating_point()
        if kind_differs or (not want.is_floating_point() and got.dtype != want.dtype):
            raise WeightsError(f"{source}: tensor {name!r} is {got.dtype}, expected {want.dtype}")
        if name.endswith((".scales", ".zeros")) and not bool(torch.isfinite(got).all()):
            raise WeightsError(f"{source}: tensor {name!r} holds NaN or infinite values")
    model.load_state_dict(tensors, strict=True)
    model.to(device)
    for p in model.parameters():
        p.data = p.data.to(dtype)
    return model.eval(), cfg, spec
