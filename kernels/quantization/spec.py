"""What a quantization was: the scheme, its grid, which layers, the data it saw. Saved in the file's metadata."""

from __future__ import annotations

import fnmatch
from typing import get_args

import msgspec

from myolo.events.payloads.models import QuantScheme

SCHEMES: tuple[str, ...] = get_args(QuantScheme)
CALIBRATED: tuple[str, ...] = ("gptq", "dynamic_fixed_point")  # dfp: for its activation formats
# The transformer blocks' linear layers. Embeddings are a lookup (no matmul to speed up) and the output head
# turns every error into the logits directly; both stay in the source precision unless asked.
DEFAULT_LAYERS: tuple[str, ...] = ("layers.*",)
FORMAT = 1
META_QUANT = "myolo.quant"  # the safetensors metadata key the QuantSpec is written under


class LayerSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One quantized linear: its shape (out, in), grid, and activation format (dynamic fixed point)."""

    shape: tuple[int, int]
    bits: int
    group_size: int
    symmetric: bool
    act_bits: int | None = None
    act_fl: int | None = None


class QuantSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The metadata block of a quantized model file (``myolo.quant``)."""

    format: int = FORMAT
    scheme: QuantScheme
    bits: int
    group_size: int
    model: str
    model_args: dict[str, int | float | bool | str] = {}
    layers: dict[str, LayerSpec]
    calib_sha256: str | None = None
    calib_tokens: int = 0
    source_sha256: str | None = None


def selected(name: str, patterns: tuple[str, ...]) -> bool:
    """Whether the linear ``name`` (``layers.3.attention.wq``) is quantized under ``patterns``."""
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)
