"""A retraining job from a model's template: the manifest the drift component submits when a model drifts.

The template (kept by the registry) is an ElasticJob manifest without a name, an export path or initial
weights; each run sets them: the job is named after the model and the detection, exports to
``<artifact_dir>/<job>/model.safetensors``, checkpoints in ``<checkpointDir>/<job>`` (or beside its export), and
starts from the champion's weights when the template says so.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePosixPath
from typing import Any

import yaml

from myolo.coordinator.jobs.interface import manifest_document
from myolo.coordinator.registry.interface import TemplateInfo, VersionInfo
from myolo.coordinator.registry.interface import local_path as registry_path

MAX_JOB_NAME = 63


def job_name(model: str, detection_id: str) -> str:
    """A DNS-label job name unique to the detection: ``<model>-retrain-<8 hex>``, the model part shortened."""
    tag = hashlib.sha256(detection_id.encode()).hexdigest()[:8]
    stem = re.sub(r"[^a-z0-9-]+", "-", model.lower()).strip("-") or "model"
    stem = stem[: MAX_JOB_NAME - len(tag) - len("-retrain-")].rstrip("-") or "m"
    return f"{stem}-retrain-{tag}"


def export_path(template: TemplateInfo, job: str) -> str:
    return str(PurePosixPath(template.artifact_dir) / job / "model.safetensors")


def local_path(artifact: str, version: int) -> str:
    """A path the trainer can open: ``file://`` stripped; another scheme cannot be trained from."""
    path = registry_path(artifact)
    if path is None:
        raise ValueError(
            f"retrain.from_champion: the champion (version {version}) is at {artifact}, which the trainer cannot "
            "open; copy it to shared storage and register that path, or set --from-scratch"
        )
    return path


def manifest(template: TemplateInfo, model: str, job: str, detection_id: str, champion: VersionInfo | None) -> str:
    """The template with this run's name, labels, export path and (from the champion) initial weights."""
    doc: dict[str, Any] = manifest_document(template.manifest)
    meta = doc.setdefault("metadata", {}) or {}
    doc["metadata"] = meta
    meta["name"] = job
    labels = dict(meta.get("labels") or {})
    labels["retrain-of"] = re.sub(r"[^A-Za-z0-9_.-]+", "-", model)[:63]
    labels["drift"] = hashlib.sha256(detection_id.encode()).hexdigest()[:16]
    meta["labels"] = labels
    spec = doc.setdefault("spec", {})
    trainer = spec.setdefault("trainer", {}) or {}
    spec["trainer"] = trainer
    checkpoint = dict(trainer.get("checkpoint") or {})
    trainer["checkpoint"] = checkpoint
    checkpoint["exportPath"] = export_path(template, job)
    # each run checkpoints apart: a run sharing the last one's directory would resume from its end
    base = spec.pop("checkpointDir", None) or checkpoint.pop("dir", None)
    spec["checkpointDir"] = (
        str(PurePosixPath(base) / job) if base else str(PurePosixPath(template.artifact_dir) / job / "checkpoints")
    )
    if template.from_champion and champion is not None:
        checkpoint["initFrom"] = local_path(champion.artifact, champion.version)
    return yaml.safe_dump(doc, sort_keys=False)
