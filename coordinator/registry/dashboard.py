"""What the dashboard shows of the registry: per model its versions (lineage through ``parent``, the job
and generation they came from, evaluations and metrics) and its aliases with their history; registrations and
alias moves for the events timeline."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from myolo.coordinator.core.dashboard import Moment
from myolo.coordinator.registry.records import AliasRecord, ModelRecord, VersionRecord
from myolo.coordinator.registry.view import RegistryView


class ModelEntry(msgspec.Struct, kw_only=True, frozen=True):
    model: ModelRecord
    versions: list[VersionRecord]  # oldest first
    aliases: list[AliasRecord]


class RegistryBoard(msgspec.Struct, kw_only=True, frozen=True):
    models: list[ModelEntry]


def board(view: RegistryView) -> RegistryBoard:
    return RegistryBoard(
        models=[
            ModelEntry(model=m, versions=view.versions_of(m.name), aliases=view.aliases_of(m.name))
            for m in view.all_models()
        ]
    )


def moments(view: RegistryView) -> Iterator[Moment]:
    for name, held in view.versions.items():
        for v in held.values():
            parent = f" from v{v.parent}" if v.parent is not None else ""
            yield Moment(time=v.created, kind="registration", subject=name, text=f"v{v.version}{parent} by {v.by}")
    for name, aliases in view.aliases.items():
        for a in aliases.values():
            for c in a.history:
                to = f"v{c.version}" if c.version is not None else "nothing"
                text = f"@{a.alias} -> {to} by {c.by}" + (f": {c.reason}" if c.reason else "")
                yield Moment(time=c.when, kind="alias", subject=name, text=text)
