"""The trainer job's fields as a flat list, for what is derived from them: command-line options, the
manifest's ``spec.trainer``, the job file's precedence. One walk of the sections, so no field is listed twice.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from myolo.events.payloads.trainer_flags import flag, flat_name, negative
from myolo.events.payloads.trainer_job import Section, TrainerJob, TrainerJobError


class TrainerField(msgspec.Struct, frozen=True, kw_only=True):
    """One field: ``path`` is ``<section>.<name>`` (``name`` alone for a field outside the sections, as the
    trainer's own ``nproc``); ``kind`` is what a command line takes for it (``list`` for a mapping given as
    repeated ``key=value``)."""

    path: str
    section: str
    name: str
    annotation: Any
    kind: type
    default: Any
    help: str
    flag: str
    negative: str | None = None  # a boolean's "off" flag
    flat: str = ""  # its name in the flat job stored before the sections (``lr``, ``quant_bits``)

    @property
    def param(self) -> str:
        """A Python identifier for the field (a command function's parameter)."""
        return self.path.replace(".", "__")


def _metas(annotation: Any) -> tuple[Any, list[msgspec.Meta]]:
    """The annotation without Annotated and None, and its Meta objects at any level."""
    metas: list[msgspec.Meta] = []
    while True:
        if typing.get_origin(annotation) is typing.Annotated:
            metas += [m for m in annotation.__metadata__ if isinstance(m, msgspec.Meta)]
            annotation = annotation.__origin__
        elif isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
            rest = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(rest) != 1:
                return annotation, metas  # a union of scalars (a model knob's value)
            annotation = rest[0]
        else:
            return annotation, metas


def _kind(base: Any) -> type:
    origin = typing.get_origin(base)
    if origin is dict:
        return list
    if origin is typing.Literal:
        return str
    if isinstance(base, type) and issubclass(base, bool | int | float | str):
        return base
    raise TypeError(f"no command-line form for a field of type {base!r}")


def _field(section: str, f: msgspec.structs.FieldInfo) -> TrainerField:
    path = f"{section}.{f.name}" if section else f.name
    base, metas = _metas(f.type)
    help_text = " ".join(m.description for m in metas if m.description)
    kind = _kind(base)
    default = f.default_factory() if f.default_factory is not msgspec.NODEFAULT else f.default
    return TrainerField(
        path=path,
        section=section,
        name=f.name,
        annotation=f.type,
        kind=kind,
        default=default,
        help=help_text,
        flag=flag(path),
        negative=negative(path) if kind is bool else None,
        flat=flat_name(path),
    )


def trainer_fields(job_type: type[TrainerJob] = TrainerJob) -> tuple[TrainerField, ...]:
    """Every field of ``job_type`` (``TrainerJob`` or the trainer's extension of it), section by section."""
    out: list[TrainerField] = []
    for f in msgspec.structs.fields(job_type):
        if isinstance(f.type, type) and issubclass(f.type, Section):
            out += [_field(f.name, g) for g in msgspec.structs.fields(f.type)]
        else:
            out.append(_field("", f))
    return tuple(out)


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
