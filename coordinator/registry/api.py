"""What the registry's own HTTP routes ask of it: the models, versions and aliases as its records, and the
writes an operator makes. Other components ask the narrower ``ModelRegistry`` (``interface.py``)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from myolo.coordinator.registry.interface import ModelRegistry, NewVersion
from myolo.coordinator.registry.records import AliasRecord, ModelRecord, RetrainTemplate, VersionRecord


@runtime_checkable
class RegistryRoutes(ModelRegistry, Protocol):
    def model(self, name: str) -> ModelRecord | None: ...

    def models(self) -> tuple[ModelRecord, ...]:
        """Every model, by name."""

    def versions(self, name: str) -> tuple[VersionRecord, ...]:
        """The model's versions, oldest first (empty for a model not known)."""

    def version(self, name: str, n: int) -> VersionRecord | None: ...

    def alias(self, name: str, alias: str) -> AliasRecord | None:
        """The alias's record (``version`` None once removed: the history stays), None if never set."""

    def aliases(self, name: str) -> tuple[AliasRecord, ...]:
        """The model's aliases (removed ones too), by alias name."""

    def champion(self, name: str) -> VersionRecord | None:
        """The version the model's ``champion`` alias points at, if any."""

    def lineage(self, name: str, n: int) -> tuple[VersionRecord, ...]:
        """Version ``n`` then its parent, the parent's parent, ... up to the root (UnknownVersion if no ``n``)."""

    def registered(self, model: str, new: NewVersion) -> VersionRecord | None:
        """The version ``new`` already is: the same run (job, generation), or without a job the same artifact
        with the same sha256. None when registering it would make a new version."""

    async def register(self, model: str, new: NewVersion, by: str) -> VersionRecord:
        """Record the next version of ``model`` (creating the model, without a template, if it is new); it
        becomes ``challenger``, and ``champion`` too when the model's ``promote_margin`` says so (by
        ``auto``). What was registered before (``registered``) is answered as it is: idempotent. Raises
        ``NotLeader``, ``RegistryError`` naming the field (a bad name, a parent that is not a version, a metric
        that is not finite), ``RegistryFull`` past a bound."""

    async def set_alias(self, model: str, alias: str, version: int | None, by: str, reason: str) -> AliasRecord:
        """Point ``alias`` at ``version`` (None: remove it), recording who, when and why (``reason`` is
        required). Setting it where it already points changes nothing. Raises ``NotLeader``, ``UnknownModel``,
        ``UnknownVersion``, ``UnknownAlias`` (removing one never set), ``RegistryError``, ``RegistryFull``."""

    async def put_model(
        self,
        name: str,
        description: str,
        retrain: RetrainTemplate | None,
        promote_margin: float | None,
        by: str,
        *,
        quantize_margin: float | None = None,
    ) -> ModelRecord:
        """Create or update the model as given: each value replaces the recorded one (None clears the template
        or a margin). The template's manifest is checked as an ElasticJob (the error names
        ``retrain.manifest`` and the manifest's field). Raises ``NotLeader``, ``RegistryError``,
        ``RegistryFull``."""
