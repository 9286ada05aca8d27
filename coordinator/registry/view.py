"""The registry as every coordinator holds it in memory: the records of ``myolo.state.registry``, indexed.

One class applies a record (from the state topic, or the leader's own write) and answers the reads, so a
standby rebuilt from the topic answers exactly what the leader does.
"""

from __future__ import annotations

import msgspec

from myolo.coordinator.registry.errors import UnknownVersion
from myolo.coordinator.registry.records import (
    ALIAS,
    CHAMPION,
    MODEL,
    VERSION,
    AliasRecord,
    ModelRecord,
    VersionRecord,
)


class RegistryView:
    def __init__(self) -> None:
        self.models: dict[str, ModelRecord] = {}
        self.versions: dict[str, dict[int, VersionRecord]] = {}
        self.aliases: dict[str, dict[str, AliasRecord]] = {}
        self.runs: dict[tuple[str, str, int], int] = {}  # (model, job, generation) -> version
        self.artifacts: dict[tuple[str, str, str], int] = {}  # (model, artifact, sha256) -> version
        self.unannounced: set[tuple[str, int]] = set()

    # ---- applying records -----------------------------------------------------------------------------------
    def apply(self, record: msgspec.Struct) -> None:
        if isinstance(record, ModelRecord):
            self.models[record.name] = record
        elif isinstance(record, VersionRecord):
            self.versions.setdefault(record.model, {})[record.version] = record
            if record.job is not None and record.generation is not None:
                self.runs[(record.model, record.job, record.generation)] = record.version
            self.artifacts.setdefault((record.model, record.artifact, record.sha256), record.version)
            if record.announced:
                self.unannounced.discard((record.model, record.version))
            else:
                self.unannounced.add((record.model, record.version))
        elif isinstance(record, AliasRecord):
            self.aliases.setdefault(record.model, {})[record.alias] = record

    def forget(self, key: str, kind: str) -> None:
        """A tombstone (the registry writes none; an operator's tool might): the record is gone."""
        if kind == MODEL:
            self.models.pop(key, None)
        elif kind == VERSION:
            model, _, number = key.rpartition(":")
            if number.isdigit():
                gone = self.versions.get(model, {}).pop(int(number), None)
                self.unannounced.discard((model, int(number)))
                if gone is not None:
                    self.runs = {k: v for k, v in self.runs.items() if not (k[0] == model and v == gone.version)}
                    self.artifacts = {
                        k: v for k, v in self.artifacts.items() if not (k[0] == model and v == gone.version)
                    }
        elif kind == ALIAS:
            model, _, alias = key.partition("@")
            self.aliases.get(model, {}).pop(alias, None)

    # ---- reads ----------------------------------------------------------------------------------------------
    def model(self, name: str) -> ModelRecord | None:
        return self.models.get(name)

    def all_models(self) -> list[ModelRecord]:
        return [self.models[n] for n in sorted(self.models)]

    def versions_of(self, name: str) -> list[VersionRecord]:
        held = self.versions.get(name, {})
        return [held[n] for n in sorted(held)]

    def version(self, name: str, n: int) -> VersionRecord | None:
        return self.versions.get(name, {}).get(n)

    def latest(self, name: str) -> int:
        """The newest version number of the model (0: none), whichever record says more."""
        model = self.models.get(name)
        return max(model.latest_version if model else 0, max(self.versions.get(name, {}), default=0))

    def alias(self, name: str, alias: str) -> AliasRecord | None:
        return self.aliases.get(name, {}).get(alias)

    def aliases_of(self, name: str) -> list[AliasRecord]:
        held = self.aliases.get(name, {})
        return [held[a] for a in sorted(held)]

    def pointing_at(self, name: str, n: int) -> list[str]:
        """The aliases that point at version ``n`` now."""
        return [a.alias for a in self.aliases_of(name) if a.version == n]

    def champion(self, name: str) -> VersionRecord | None:
        held = self.alias(name, CHAMPION)
        return self.version(name, held.version) if held is not None and held.version is not None else None

    def registered(self, model: str, job: str | None, generation: int | None, artifact: str, sha256: str) -> int | None:
        if job is not None and generation is not None:
            return self.runs.get((model, job, generation))
        return self.artifacts.get((model, artifact, sha256))

    def lineage(self, name: str, n: int) -> list[VersionRecord]:
        """Version ``n``, its parent, the parent's parent, ... to the root (a parent not held ends it)."""
        current = self.version(name, n)
        if current is None:
            raise UnknownVersion(name, n)
        chain, seen = [current], {n}
        while current.parent is not None and current.parent not in seen:
            parent = self.version(name, current.parent)
            if parent is None:
                break
            chain.append(parent)
            seen.add(parent.version)
            current = parent
        return chain

    def count(self) -> int:
        return sum(len(v) for v in self.versions.values())
