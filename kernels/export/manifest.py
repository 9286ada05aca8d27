"""``<artifact>.json``: the export's manifest (``myolo.events.payloads.ModelExport``), written atomically.

The agent of rank 0's node reads it when the job's workers exit and attaches it to the completion event, so
a reader must never see half of one: temp file, fsync, rename (``myolo.common.files.atomic_write``).
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from myolo.common.files import atomic_write
from myolo.events.payloads.models import ModelExport
from myolo.kernels.export.files import file_mode

SUFFIX = ".json"


def manifest_path(artifact: str | os.PathLike[str]) -> Path:
    """``model.safetensors`` -> ``model.safetensors.json`` (beside it, whatever its suffix)."""
    path = Path(artifact)
    return path.with_name(path.name + SUFFIX)


def write_manifest(export: ModelExport, artifact: str | os.PathLike[str]) -> Path:
    """Write ``export`` next to ``artifact``; returns the manifest's path."""
    path = manifest_path(artifact)
    atomic_write(path, msgspec.json.encode(export), mode=file_mode())
    return path
