"""Trainer job values as a command line or a job file gives them: ``key=value`` items for the mapping fields,
and values by field path (``optimizer.lr``) nested into the job's sections."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from myolo.events.payloads.trainer_errors import TrainerJobError


def _scalar(raw: str) -> int | float | bool | str:
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for conv in (int, float):
        try:
            return conv(raw)
        except ValueError:
            continue
    return raw


def parse_model_args(items: list[str] | None) -> dict[str, Any]:
    """``--model-arg n_layers=8`` pairs; values are parsed as bool, int or float when they look like one."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise TrainerJobError.at("model.args", f"{item!r} must look like name=value, e.g. n_layers=8")
        out[key.strip()] = _scalar(raw)
    return out


def parse_ops(items: list[str] | None) -> dict[str, list[str]]:
    """``--ops rms_norm=triton,native`` / ``--ops '*=reference'``: backend order per fused op."""
    out: dict[str, list[str]] = {}
    for item in items or []:
        op, sep, names = item.partition("=")
        if not sep or not op.strip() or not names.strip():
            raise TrainerJobError.at(
                "runtime.ops_prefer", f"{item!r} must look like op=backend[,backend...], e.g. rms_norm=triton,native"
            )
        out[op.strip()] = [n.strip() for n in names.split(",") if n.strip()]
    return out


# the mappings a command line gives as repeated key=value items
PARSERS: dict[str, Callable[[list[str]], dict[str, Any]]] = {
    "model.args": parse_model_args,
    "runtime.ops_prefer": parse_ops,
}


def nest(given: Mapping[str, Any], base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Flag values by field path laid over ``base`` (a job file's sections): ``{"optimizer.lr": 1e-3}`` ->
    ``{"optimizer": {"lr": 1e-3}}``. A mapping field, given as a mapping or as a command line's repeated
    ``key=value`` items, adds to the file's mapping."""
    out: dict[str, Any] = {k: dict(v) if isinstance(v, Mapping) else v for k, v in (base or {}).items()}
    for path, value in given.items():
        section, _, name = path.rpartition(".")
        if path in PARSERS:
            items = PARSERS[path](list(value)) if isinstance(value, list | tuple) else value
            value = {**out.get(section, {}).get(name, {}), **items}
        if section:
            target = out.setdefault(section, {})
            if not isinstance(target, dict):
                raise TrainerJobError(f"{section}: must be a table of its fields, got {target!r}", section)
            target[name] = value
        else:
            out[name] = value
    return out
