"""The API's answers: each state record with what a reader needs beside it (the aliases pointing at a version,
its lineage, an alias's last move). ``myoloctl`` decodes the same Structs, so both sides read one shape."""

from __future__ import annotations

import msgspec

from myolo.coordinator.registry.api import RegistryRoutes
from myolo.coordinator.registry.records import AliasChange, AliasRecord, ModelRecord, Source, VersionRecord


class ModelAnswer(ModelRecord, kw_only=True):
    aliases: dict[str, int]  # alias -> version, for the aliases set now (always said, even empty)


class LineageEntry(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One step of a version's lineage: what produced it and what it was trained from."""

    version: int
    parent: int | None = None
    source: Source
    job: str | None = None
    generation: int | None = None
    drift_event: str | None = None
    created: float
    by: str


class VersionAnswer(VersionRecord, kw_only=True):
    aliases: list[str]  # the aliases pointing at it now (always said, even empty)
    lineage: list[LineageEntry] | None = None  # itself, its parent, ... to the root (one version's answer only)


class AliasAnswer(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An alias with its history (oldest first; ``/history`` answers newest first) or, in a list, its last
    move only; ``updated``: when it last moved."""

    model: str
    alias: str
    version: int | None
    updated: float | None
    dropped: int = 0
    history: list[AliasChange] | None = None
    last: AliasChange | None = None


class AliasHistory(AliasAnswer, kw_only=True):
    """``/history``: newest first; with ``?at=``, where the alias pointed at that time (else both None)."""

    at: float | None
    version_at: int | None


class ModelList(msgspec.Struct, kw_only=True):
    items: list[ModelAnswer]


class VersionPage(msgspec.Struct, kw_only=True):
    items: list[VersionAnswer]
    total: int  # the newest version's number
    next_before: int | None  # ``before`` for the next page; None: the last page


class AliasList(msgspec.Struct, kw_only=True):
    items: list[AliasAnswer]


def model_answer(reg: RegistryRoutes, record: ModelRecord) -> ModelAnswer:
    aliases = {a.alias: a.version for a in reg.aliases(record.name) if a.version is not None}
    return ModelAnswer(**msgspec.structs.asdict(record), aliases=aliases)


def version_answer(reg: RegistryRoutes, record: VersionRecord, *, lineage: bool = False) -> VersionAnswer:
    chain = None
    if lineage:
        chain = [
            LineageEntry(
                version=v.version,
                parent=v.parent,
                source=v.source,
                job=v.job,
                generation=v.generation,
                drift_event=v.drift_event,
                created=v.created,
                by=v.by,
            )
            for v in reg.lineage(record.model, record.version)
        ]
    aliases = [a.alias for a in reg.aliases(record.model) if a.version == record.version]
    return VersionAnswer(**msgspec.structs.asdict(record), aliases=aliases, lineage=chain)


def alias_answer(record: AliasRecord, *, history: bool = True, newest_first: bool = False) -> AliasAnswer:
    last = record.history[-1] if record.history else None
    return AliasAnswer(
        model=record.model,
        alias=record.alias,
        version=record.version,
        updated=last.when if last else None,
        dropped=record.dropped,
        history=(list(reversed(record.history)) if newest_first else list(record.history)) if history else None,
        last=None if history else last,
    )
