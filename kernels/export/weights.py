"""Full model weights as safetensors: write one atomically, read one, load one into a model by name.

Safetensors because the file is plain data (no pickle: loading a registry's model runs no code) and can be
memory-mapped; the header's metadata names the model preset and the step, so the file says what it is.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import safetensors
import torch
from torch import nn

from myolo.common.digest import sha256_file
from myolo.common.files import fsync_dir
from myolo.kernels.export.stfile import write_safetensors

META_MODEL = "myolo.model"
META_MODEL_ARGS = "myolo.model_args"
META_STEP = "myolo.step"


class WeightsError(ValueError):
    """A weights file that cannot be used: missing, unreadable, or not the model's names and shapes."""


@dataclass(frozen=True)
class WrittenWeights:
    path: Path
    sha256: str
    size_bytes: int


def weights_metadata(model: str, step: int, model_args: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The header's text metadata: what ``python -m myolo.kernels.cli.export`` and a reader need to rebuild it."""
    return {
        "format": "pt",
        META_MODEL: model,
        META_MODEL_ARGS: json.dumps(dict(model_args or {}), sort_keys=True),
        META_STEP: str(step),
    }


def write_weights(
    weights: Mapping[str, torch.Tensor], path: str | os.PathLike[str], metadata: dict[str, str]
) -> WrittenWeights:
    """Write ``weights`` (CPU, contiguous copies are made where needed) to ``path`` through a temporary file in
    the same folder, fsynced and renamed over it (a reader never sees half a file); its SHA-256 and size."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tensors = {name: t.detach().to("cpu").contiguous() for name, t in weights.items()}
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            write_safetensors(f, tensors, metadata)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(target.parent)
    return WrittenWeights(target, *sha256_file(target))


def read_weights(path: str | os.PathLike[str]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """(tensors on CPU, header metadata) of a safetensors file; WeightsError when it cannot be read."""
    source = Path(path)
    if not source.is_file():
        raise WeightsError(f"weights file {str(source)!r} does not exist or is not a file")
    try:
        with safetensors.safe_open(str(source), framework="pt", device="cpu") as f:
            return {name: f.get_tensor(name) for name in f.keys()}, dict(f.metadata() or {})  # noqa: SIM118
    except (OSError, safetensors.SafetensorError) as exc:
        raise WeightsError(f"weights file {source} is not readable safetensors: {exc}") from exc


def describe_model(name: str, model_args: Mapping[str, Any] | None = None) -> str:
    """How errors name the model: the preset, and its overrides when there are any."""
    args = dict(model_args or {})
    return f"{name!r}" + (f" with model_args {json.dumps(args, sort_keys=True)}" if args else "")


def check_compatible(
    expected: Mapping[str, torch.Size],
    got: Mapping[str, torch.Size],
    source: str,
    model: str,
    saved_as: str | None = None,
) -> None:
    """WeightsError naming the first tensor that is missing, unexpected or of another shape than the model's;
    ``model`` and ``saved_as`` (the model the file says it was written for) are ``describe_model``'s text."""
    of = f" (the file was written for model {saved_as})" if saved_as and saved_as != model else ""
    fix = "use weights exported from the same model preset and model_args"
    missing = sorted(set(expected) - set(got))
    if missing:
        raise WeightsError(
            f"{source} has no tensor {missing[0]!r} of model {model}{of} ({len(missing)} missing): {fix}"
        )
    extra = sorted(set(got) - set(expected))
    if extra:
        raise WeightsError(
            f"{source} holds tensor {extra[0]!r}, which model {model} does not have{of} "
            f"({len(extra)} unexpected): {fix}"
        )
    for name, shape in expected.items():
        if tuple(got[name]) != tuple(shape):
            raise WeightsError(
                f"{source}: tensor {name!r} has shape {list(got[name])} but model {model} has {list(shape)}{of}: {fix}"
            )


def saved_model(metadata: Mapping[str, str]) -> str | None:
    """``describe_model`` of the model a file's metadata names (None: not one of our exports)."""
    name = metadata.get(META_MODEL)
    if not name:
        return None
    try:
        args = json.loads(metadata.get(META_MODEL_ARGS) or "{}")
    except ValueError:
        args = {}
    return describe_model(name, args if isinstance(args, dict) else {})


@torch.no_grad()
def load_weights(model: nn.Module, path: str | os.PathLike[str], model_label: str) -> dict[str, str]:
    """Copy the file's tensors into ``model``'s parameters (and persistent buffers), by name, casting the dtype.

    Every name of the model must be in the file with the same shape, and nothing else: a partial load would
    train a model that is half the champion and half a fresh init. ``model_label``: ``describe_model``'s text,
    for the errors. Returns the file's metadata."""
    tensors, metadata = read_weights(path)
    expected = model.state_dict()
    check_compatible(
        {n: t.shape for n, t in expected.items()},
        {n: t.shape for n, t in tensors.items()},
        str(path),
        model_label,
        saved_model(metadata),
    )
    for name, target in expected.items():
        target.copy_(tensors[name])
    return metadata
