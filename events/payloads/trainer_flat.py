"""Reading a trainer job stored flat (one table of every field: ``lr``, ``tp``, ``quant_bits``) as sections.

Job records, retraining templates and job files written before the sections hold that form; they are read, never
written, so a stored job is not lost on upgrade. Which flat name goes where comes from the field table
(``TrainerField.flat``), so no second list of fields exists. New input (a manifest applied, a flag) must use the
sections: only readers of what was stored call this.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from myolo.events.payloads.trainer_fields import TrainerField, trainer_fields
from myolo.events.payloads.trainer_job import TrainerJob


@cache
def flat_fields(job_type: type[TrainerJob] = TrainerJob) -> dict[str, TrainerField]:
    """Flat name -> the sectioned field it became (the fields outside the sections are not flat: left out)."""
    return {f.flat: f for f in trainer_fields(job_type) if f.section}


def _is_section(key: str, value: Any, job_type: type[TrainerJob]) -> bool:
    # "model", "defense" and "watermark" were flat fields and are sections: a table is the section
    return isinstance(value, Mapping) and key in job_type.__struct_fields__


def flat_keys(
    data: Mapping[str, Any], rename: Callable[[str], str] = str, job_type: type[TrainerJob] = TrainerJob
) -> list[str]:
    """The keys of ``data`` in the flat form (``rename``: how its keys are spelt, as ``_camel`` in manifests)."""
    names = {rename(flat) for flat in flat_fields(job_type)}
    return [k for k, v in data.items() if k in names and not _is_section(k, v, job_type)]


def sectioned(
    data: Mapping[str, Any], rename: Callable[[str], str] = str, job_type: type[TrainerJob] = TrainerJob
) -> dict[str, Any]:
    """``data`` with its flat keys moved into their sections (``lr`` -> ``optimizer.lr``); a key already in the
    sectioned form, or unknown, stays as it is, and a value given in its section wins over its flat one."""
    fields = {rename(flat): f for flat, f in flat_fields(job_type).items()}
    moved = set(flat_keys(data, rename, job_type))
    out: dict[str, Any] = {k: dict(v) if isinstance(v, Mapping) else v for k, v in data.items() if k not in moved}
    for key in moved:
        f = fields[key]
        section = out.setdefault(f.section, {})
        if isinstance(section, dict):
            section.setdefault(rename(f.name), data[key])
    return out
