"""What other components (drift, quantize) may ask of the registry: ``ModelRegistry``.

Keep this stable: the drift component reads retraining templates and champions through it and registers what
its retraining jobs export; quantize reads the version it quantizes and registers the result. It answers in
small frozen Structs of its own (``VersionInfo``, ``TemplateInfo``), never in the registry's records; the HTTP
routes take the wider ``RegistryRoutes`` (``registry/api.py``). Reads answer from the state every coordinator
follows; writes are the leader's (``NotLeader`` on a standby), recorded in ``myolo.state.registry`` before their
events go to ``myolo.models``.
"""

from __future__ import annotations

from typing import Annotated, Protocol, runtime_checkable

import msgspec

# re-exported: what callers catch
from myolo.coordinator.registry.errors import RegistryError as RegistryError
from myolo.coordinator.registry.errors import UnknownModel as UnknownModel
from myolo.coordinator.registry.errors import UnknownVersion as UnknownVersion
from myolo.coordinator.registry.records import Tags
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


class VersionInfo(msgspec.Struct, kw_only=True, frozen=True):
    """What another component needs of a registered version: where its weights are, what they were trained
    from, and how they were quantized (None: a float model)."""

    model: str
    version: int
    artifact: str
    sha256: str
    parent: int | None
    quantization: Quantization | None


class TemplateInfo(msgspec.Struct, kw_only=True, frozen=True):
    """A model's retraining template: the ElasticJob manifest each run starts from, where runs export to,
    whether they start from the champion's weights, and how long to wait between two runs."""

    manifest: str
    artifact_dir: str
    from_champion: bool
    cooldown_s: float


@runtime_checkable
class ModelRegistry(Protocol):
    def has_model(self, name: str) -> bool:
        """Is the model known (registered, or created with ``PUT /v1/models/{name}``)?"""

    def version_info(self, name: str, n: int) -> VersionInfo | None:
        """Version ``n`` of the model; None when the model or the version is not known."""

    def champion_info(self, name: str) -> VersionInfo | None:
        """The version the model's ``champion`` alias points at, if any."""

    def retrain_template(self, name: str) -> TemplateInfo | None:
        """The model's retraining template; None for a model not known or without one."""

    async def add_version(self, model: str, new: NewVersion, by: str) -> VersionInfo:
        """Register ``new`` as ``register`` does (``registry/api.py``: idempotent, auto-promotion, the same
        refusals) and answer the version it is."""
