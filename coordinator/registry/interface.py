"""What other components (drift, rollouts) and the HTTP routes may ask of the registry: ``ModelRegistry``.

Keep this stable: the drift component registers what its retraining jobs export and reads retraining
templates and champions through it; rollouts will read champions. Reads answer from the state every
coordinator follows; writes are the leader's (``NotLeader`` on a standby), recorded in
``myolo.state.registry`` before their events go to ``myolo.models``.
"""

from __future__ import annotations

from typing import Annotated, Protocol, runtime_checkable

import msgspec

# re-exported: what callers catch
from myolo.coordinator.registry.errors import RegistryError as RegistryError
from myolo.coordinator.registry.errors import UnknownModel as UnknownModel
from myolo.coordinator.registry.errors import UnknownVersion as UnknownVersion
from myolo.coordinator.registry.records import AliasRecord, ModelRecord, RetrainTemplate, Tags, VersionRecord
from myolo.events.payloads.common import Id, NonNegInt
from myolo.events.payloads.external import Sha256
from myolo.events.payloads.models import MAX_METRICS, EvalResult, ModelExport, PathOrUrl, Quantization, Text, Watermark

MetricName = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z][A-Za-z0-9_.-]*$")]


class NewVersion(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A version to register: what a finished job exported (``from_export``) or an operator brings.

    ``job`` and ``generation`` say which training run produced it; registering the same run twice returns the
    version already registered (events are delivered at least once). Without a job, the same artifact with
    the same sha256 is the same version. ``eval`` is the held-out evaluation (auto-promotion compares its
    loss); ``metrics`` any other numbers (``loss=2.3``); ``parent`` the version it was trained from."""

    artifact: PathOrUrl
    sha256: Sha256
    size_bytes: NonNegInt | None = None
    steps: NonNegInt | None = None
    job: Id | None = None
    generation: NonNegInt | None = None
    data_sha256: Sha256 | None = None
    eval: EvalResult | None = None
    metrics: Annotated[dict[MetricName, float], msgspec.Meta(max_length=MAX_METRICS - 2)] = {}  # + loss, perplexity
    parent: NonNegInt | None = None
    drift_event: Id | None = None
    description: Text = ""
    tags: Tags = {}
    quantization: Quantization | None = None  # a quantized model of ``parent``: how, and its parent's evaluation
    watermark: Watermark | None = None  # the weights carry a keyed mark: its commitment and settings (never the key)

    @classmethod
    def from_export(
        cls,
        export: ModelExport,
        *,
        job: str,
        generation: int,
        parent: int | None = None,
        drift_event: str | None = None,
    ) -> NewVersion:
        """The version a finished job's export (its completion event's ``ModelExport``) becomes."""
        return cls(
            artifact=export.artifact,
            sha256=export.sha256,
            size_bytes=export.size_bytes,
            steps=export.steps,
            job=job,
            generation=generation,
            data_sha256=export.data_sha256,
            eval=export.eval,
            parent=parent,
            drift_event=drift_event,
            quantization=export.quantization,
            watermark=export.watermark,
        )


def local_path(artifact: str) -> str | None:
    """The filesystem path a version's artifact names (``file://`` stripped); None for a URL of another scheme,
    which workers cannot open."""
    if artifact.startswith("file://"):
        return artifact.removeprefix("file://")
    return None if "://" in artifact else artifact


@runtime_checkable
class ModelRegistry(Protocol):
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
