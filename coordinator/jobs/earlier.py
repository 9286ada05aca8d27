"""Job records and retraining templates stored with a flat ``spec.trainer``, read as the sections.

A record on the compacted jobs topic, a backup archive or a model's template keeps the form it was written in
until it is written again; read as is it would not decode (or its manifest would not apply), and the job or
template would be lost on upgrade. These readers move each flat key to its section (derived from the field
table, ``myolo.events.payloads.trainer_flat``) and say which keys moved; what is written next is sectioned.
"""

from __future__ import annotations

from typing import Any

import yaml

from myolo.coordinator.jobs.manifest import ManifestError, camel, load_yaml
from myolo.events.payloads.trainer_flat import flat_keys, sectioned


def upgrade_trainer(holder: Any, key: str = "trainer", rename: Any = str) -> list[str]:
    """``holder[key]``, a trainer job, sectioned in place; the flat keys moved (none: left as it was)."""
    trainer = holder.get(key) if isinstance(holder, dict) else None
    if not isinstance(trainer, dict):
        return []
    moved = flat_keys(trainer, rename)
    if moved:
        holder[key] = sectioned(trainer, rename)
    return moved


def upgrade_manifest(text: str) -> tuple[str, list[str]]:
    """A manifest's YAML with ``spec.trainer`` sectioned, and the flat keys moved; the text itself (comments
    and all) when none were flat, or when it is not a manifest this can read."""
    try:
        doc = load_yaml(text.encode())
    except ManifestError:
        return text, []
    moved = upgrade_trainer(doc.get("spec"), rename=camel)
    if not moved:
        return text, []
    return yaml.safe_dump(doc, sort_keys=False), [f"spec.trainer.{k}" for k in moved]


def upgrade_job_record(record: dict[str, Any]) -> list[str]:
    """A job record's builtins with its trainer job and manifest sectioned in place (either record form: with
    ``spec.job``, or flat with the job in ``spec``); the fields moved, by their place in the record."""
    spec = record.get("spec")
    if not isinstance(spec, dict):
        return []
    split = "job" in spec
    job, where = (spec.get("job"), "spec.job") if split else (spec, "spec")
    moved = [f"{where}.trainer.{k}" for k in upgrade_trainer(job)]
    holder = spec if split else record
    if isinstance(holder.get("manifest"), str):
        holder["manifest"], in_manifest = upgrade_manifest(holder["manifest"])
        moved += [f"manifest {k}" for k in in_manifest]
    return moved
