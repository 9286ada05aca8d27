"""Full, unsharded model weights from a DCP checkpoint, in one process, without a process group.

Why read the checkpoint's metadata and load into tensors made from it (``dcp.load`` with ``no_dist``), not
``format_utils.dcp_to_torch_save`` or the private ``_EmptyStateDictLoadPlanner``: only public API, and only the
``"model"`` part is allocated and read (the optimizer state, twice the model's size, stays on disk). DCP
stores each tensor by its fully-qualified name and *global* shape, whatever the tp/pp/dp layout that wrote it
(``myolo.kernels.checkpoint.state``), so loading into full-size plain tensors reassembles every shard.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.metadata import Metadata, TensorStorageMetadata

from myolo.kernels.checkpoint.layout import METADATA, parse_step
from myolo.kernels.checkpoint.marker import read_marker

MODEL_KEY = "model"
TRAIN_KEY = "train"


@dataclass(frozen=True)
class Consolidated:
    """The model's full weights (CPU, contiguous, by parameter name) and the step the checkpoint holds."""

    weights: dict[str, torch.Tensor]
    step: int
    source: Path  # the step directory read


def resolve_checkpoint(path: str | os.PathLike[str]) -> Path:
    """A checkpoint step directory (``step-NNNNNNNN/`` with ``.metadata``), or a checkpoint root, which
    stands for the checkpoint its ``latest.json`` names. FileNotFoundError says which of the two is missing."""
    root = Path(path)
    if (root / METADATA).is_file():
        return root
    if not root.is_dir():
        raise FileNotFoundError(f"checkpoint {str(root)!r} does not exist")
    marker = read_marker(root)
    if marker is None:
        raise FileNotFoundError(
            f"{root} is neither a checkpoint (no {METADATA}) nor a checkpoint directory with a latest.json; "
            "pass a step-NNNNNNNN directory or the --checkpoint-dir of a run that saved"
        )
    chosen = root / marker.path
    if not (chosen / METADATA).is_file():
        raise FileNotFoundError(f"{root}/latest.json names {marker.path}, which has no {METADATA}: it is incomplete")
    return chosen


def model_tensors(metadata: Metadata) -> dict[str, torch.Tensor]:
    """Empty full-size tensors for every model entry of the checkpoint, keyed by parameter name."""
    out: dict[str, torch.Tensor] = {}
    for key, meta in metadata.state_dict_metadata.items():
        path = (metadata.planner_data or {}).get(key)
        if not path or path[0] != MODEL_KEY or not isinstance(meta, TensorStorageMetadata):
            continue
        if len(path) != 2 or not isinstance(path[1], str):
            raise ValueError(
                f"checkpoint entry {key!r} is not a flat model parameter ({path!r}); not a myolo checkpoint"
            )
        out[path[1]] = torch.empty(meta.size, dtype=meta.properties.dtype)
    return out


def consolidate(path: str | os.PathLike[str]) -> Consolidated:
    """Read the model part of the checkpoint at ``path`` (see ``resolve_checkpoint``) into full tensors."""
    directory = resolve_checkpoint(path)
    metadata = FileSystemReader(directory).read_metadata()
    weights = model_tensors(metadata)
    if not weights:
        raise ValueError(f"checkpoint {directory} holds no {MODEL_KEY!r} tensors; not a myolo training checkpoint")
    state: dict[str, object] = {MODEL_KEY: weights, TRAIN_KEY: {"step": -1}}
    with warnings.catch_warnings():
        # One process on purpose: DCP warns that it "assumes the intent is to load in a single process".
        warnings.filterwarnings("ignore", message=".*single process.*", category=UserWarning)
        dcp.load(state, checkpoint_id=directory, no_dist=True)
    step = int(state[TRAIN_KEY]["step"])  # type: ignore[index]
    named = parse_step(directory.name)
    if named is not None and named != step:
        raise ValueError(f"checkpoint {directory} holds step {step}, not the {named} its name says")
    return Consolidated(weights={k: v.contiguous() for k, v in weights.items()}, step=step, source=directory)
