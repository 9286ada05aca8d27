"""A finished run's weights as one file: consolidate a sharded checkpoint, write safetensors, evaluate it.

Why from the checkpoint and not from the live model: the checkpoint is what a resize or a restart resumes
from, so the export is exactly that state, whatever tp/pp/dp layout wrote it, and an operator can make the
same file by hand later (``python -m myolo.kernels.cli.export``). The names below import torch on first use only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from myolo.kernels.lazy import lazy_attributes

if TYPE_CHECKING:
    from myolo.kernels.export.consolidate import Consolidated, consolidate, resolve_checkpoint
    from myolo.kernels.export.evaluate import evaluate, heldout_batches
    from myolo.kernels.export.manifest import manifest_path, write_manifest
    from myolo.kernels.export.pipeline import export_checkpoint
    from myolo.kernels.export.weights import WeightsError, WrittenWeights, load_weights, read_weights, write_weights

__all__ = [
    "Consolidated",
    "WeightsError",
    "WrittenWeights",
    "consolidate",
    "evaluate",
    "export_checkpoint",
    "heldout_batches",
    "load_weights",
    "manifest_path",
    "read_weights",
    "resolve_checkpoint",
    "write_manifest",
    "write_weights",
]

__getattr__ = lazy_attributes(
    __name__,
    {
        "Consolidated": "myolo.kernels.export.consolidate",
        "consolidate": "myolo.kernels.export.consolidate",
        "resolve_checkpoint": "myolo.kernels.export.consolidate",
        "evaluate": "myolo.kernels.export.evaluate",
        "heldout_batches": "myolo.kernels.export.evaluate",
        "manifest_path": "myolo.kernels.export.manifest",
        "write_manifest": "myolo.kernels.export.manifest",
        "export_checkpoint": "myolo.kernels.export.pipeline",
        "WeightsError": "myolo.kernels.export.weights",
        "WrittenWeights": "myolo.kernels.export.weights",
        "load_weights": "myolo.kernels.export.weights",
        "read_weights": "myolo.kernels.export.weights",
        "write_weights": "myolo.kernels.export.weights",
    },
)
