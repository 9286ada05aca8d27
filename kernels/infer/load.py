"""A model to run from a weights file: the preset and overrides its header names, its tensors loaded by name."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import safetensors
import torch

from myolo.kernels.export.weights import META_MODEL, META_MODEL_ARGS, WeightsError, describe_model, load_weights
from myolo.kernels.model import GPT, ModelConfig, preset
from myolo.kernels.quantization.spec import META_QUANT


def file_metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The safetensors header's metadata, without reading the tensors."""
    try:
        with safetensors.safe_open(str(path), framework="pt", device="cpu") as f:
            return dict(f.metadata() or {})
    except (OSError, safetensors.SafetensorError) as exc:
        raise WeightsError(f"weights file {path} is not readable safetensors: {exc}") from exc


def model_of(metadata: Mapping[str, str], model: str | None, model_args: Mapping[str, Any] | None) -> tuple[str, dict]:
    """The preset and overrides to build: those given, else the file's own."""
    name = model or metadata.get(META_MODEL)
    if not name:
        raise WeightsError(f"the file names no model ({META_MODEL} is not in its metadata): pass --model")
    if model_args is None:
        try:
            saved = json.loads(metadata.get(META_MODEL_ARGS) or "{}")
        except ValueError as exc:
            raise WeightsError(f"metadata {META_MODEL_ARGS} is not JSON: {exc}") from None
        model_args = saved if isinstance(saved, dict) else {}
    return name, dict(model_args)


def load_model(
    path: str | os.PathLike[str],
    *,
    model: str | None = None,
    model_args: Mapping[str, Any] | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
) -> tuple[GPT, ModelConfig]:
    """The GPT of an export (``myolo.kernels.export``) or of a quantized file (``myolo.kernels.quantization``), in eval
    mode on ``device``, its float weights in ``dtype``."""
    metadata = file_metadata(path)
    if META_QUANT in metadata:
        from myolo.kernels.quantization.file import load_quantized

        expect = {"model": model, "model_args": dict(model_args) if model_args is not None else None}
        quant, cfg, _ = load_quantized(path, dtype=dtype, device=device, expect=expect)
        return quant, cfg
    name, args = model_of(metadata, model, model_args)
    cfg = preset(name, **args)
    gpt = GPT(cfg)
    load_weights(gpt, path, describe_model(name, args))
    return gpt.to(device=device, dtype=dtype).eval(), cfg
