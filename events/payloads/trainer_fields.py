"""The trainer job's fields as a flat list, for what is derived from them: command-line options, the
manifest's ``spec.trainer``, the job file's precedence. One walk of the sections, so no field is listed twice.
"""

from __future__ import annotations

import types
import typing
from typing import Any

import msgspec

from myolo.events.payloads.trainer_flags import flag, flat_name, negative
from myolo.events.payloads.trainer_job import Section, TrainerJob


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
