"""Checks of what the registry is given, before anything is written: names, retraining templates, new versions.

Pure functions raising :class:`RegistryError` with the field and what to change, so the component, the API and
``myoloctl`` (which checks a template before sending it) give the same words.
"""

from __future__ import annotations

import math
import re
from typing import Any, TypeVar

import msgspec
import yaml

from myolo.common.errors import validation_problem
from myolo.coordinator.jobs.interface import ManifestError, check_manifest, manifest_document
from myolo.coordinator.registry.errors import RegistryError
from myolo.coordinator.registry.interface import NewVersion
from myolo.coordinator.registry.records import RetrainTemplate
from myolo.events.payloads.models import AliasName, ModelName

RUN_SET = "each retraining run sets it"
PLACEHOLDER_JOB = "retrain-check"
S = TypeVar("S", bound=msgspec.Struct)
_KEY_AT = re.compile(r" - at `key` in `\$\.?([^`]*)`$")


def model_name(name: str, field: str = "model") -> str:
    try:
        return msgspec.convert(name, ModelName)
    except msgspec.ValidationError:
        raise RegistryError(
            field,
            f"{name!r} is not a model name: 1-128 letters, digits, '_', '.' or '-', starting with a letter or digit",
        ) from None


def alias_name(name: str, field: str = "alias") -> str:
    try:
        return msgspec.convert(name, AliasName)
    except msgspec.ValidationError:
        raise RegistryError(
            field, f"{name!r} is not an alias name: 1-64 letters, digits, '_' or '-', starting with a letter"
        ) from None


def reason(text: str, field: str = "reason") -> str:
    """An alias change's reason: required, at most 2000 characters (it is read in the history later)."""
    text = text.strip()
    if not text:
        raise RegistryError(field, "required: say why the alias moves (it is kept in the alias's history)")
    if len(text) > 2000:
        raise RegistryError(field, f"{len(text)} characters; at most 2000")
    return text


def margin(value: float | None, field: str = "promote_margin") -> float | None:
    if value is not None and not (math.isfinite(value) and 0.0 <= value < 1.0):
        example = (
            "e.g. 0.02 promotes a version 2% better"
            if field == "promote_margin"
            else "e.g. 0.03 promotes a quantized version at most 3% worse than its source"
        )
        raise RegistryError(field, f"{value} is not a fraction in [0, 1): {example}")
    return value


def template(value: RetrainTemplate) -> RetrainTemplate:
    """The template checked: its bounds, then its manifest as the ElasticJob a run will submit (with a name
    and an export path filled in), without the fields each run sets."""
    value = _converted(value, RetrainTemplate, "retrain")
    try:
        doc = manifest_document(value.manifest)
    except ManifestError as exc:
        raise RegistryError("retrain.manifest", str(exc)) from None
    meta, spec = doc.get("metadata"), doc.get("spec")
    if isinstance(meta, dict) and "name" in meta:
        raise RegistryError("retrain.manifest", f"metadata.name must not be set: {RUN_SET} (its job's name)")
    trainer = spec.get("trainer") if isinstance(spec, dict) else None
    checkpoint = trainer.get("checkpoint") if isinstance(trainer, dict) else None
    if isinstance(checkpoint, dict):
        for key, what in (("exportPath", "<artifact_dir>/<job name>/model.safetensors"), ("initFrom", "the champion")):
            if key in checkpoint:
                raise RegistryError(
                    "retrain.manifest", f"spec.trainer.checkpoint.{key} must not be set: {RUN_SET} ({what})"
                )
    run = _as_a_run(doc, value.artifact_dir)
    try:
        check_manifest(run)
    except ManifestError as exc:
        raise RegistryError("retrain.manifest", str(exc)) from None
    return value


def _as_a_run(doc: dict[str, Any], artifact_dir: str) -> str:
    """The manifest with what each run adds (a name, an export path), as YAML for the jobs' parser."""
    doc = dict(doc)
    meta = doc.get("metadata")
    doc["metadata"] = {**meta, "name": PLACEHOLDER_JOB} if isinstance(meta, dict) else {"name": PLACEHOLDER_JOB}
    spec = doc.get("spec")
    if isinstance(spec, dict):
        trainer = spec.get("trainer")
        trainer = dict(trainer) if isinstance(trainer, dict) else {}
        checkpoint = trainer.get("checkpoint")
        checkpoint = dict(checkpoint) if isinstance(checkpoint, dict) else {}
        checkpoint["exportPath"] = f"{artifact_dir.rstrip('/')}/{PLACEHOLDER_JOB}/model.safetensors"
        trainer["checkpoint"] = checkpoint
        doc["spec"] = {**spec, "trainer": trainer}
    return yaml.safe_dump(doc, sort_keys=False)


def new_version(value: NewVersion) -> NewVersion:
    """A new version checked against its own bounds (it may have been built in code, not decoded) and with
    every number finite (JSON has no NaN: a record holding one could not be read back)."""
    value = _converted(value, NewVersion, "")
    for key, number in value.metrics.items():
        if not math.isfinite(number):
            raise RegistryError(f"metrics.{key}", f"{number} is not a finite number")
    if value.eval is not None:
        for key in ("loss", "perplexity"):
            if not math.isfinite(getattr(value.eval, key)):
                raise RegistryError(f"eval.{key}", f"{getattr(value.eval, key)} is not a finite number")
    if (value.job is None) != (value.generation is None):
        raise RegistryError("generation" if value.job else "job", "give a job and its generation together")
    return value


def _converted(value: S, kind: type[S], prefix: str) -> S:
    try:
        return msgspec.convert(msgspec.to_builtins(value), kind)
    except msgspec.ValidationError as exc:
        problem = validation_problem(exc)
        path, message = problem.field.lstrip("."), problem.message
        if keyed := _KEY_AT.search(message):  # a mapping's key at fault: "... - at `key` in `$.tags`"
            path, message = keyed.group(1), message[: keyed.start()] + " (a key)"
        field = ".".join(p for p in (prefix, path) if p)
        raise RegistryError(field or prefix, message) from None
