"""The records of ``myolo.state.registry`` (compacted): a model, one of its versions, one of its aliases.

Keys keep one model's records apart and readable: ``<model>`` (kind ``model``), ``<model>:<n>`` (``version``),
``<model>@<alias>`` (``alias``). Model and alias names cannot contain ``:`` or ``@`` (``ModelName``,
``AliasName``), so a key names one record only. Versions are never deleted; an alias that is removed keeps its
record (``version`` None) so its history survives.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
import structlog

from myolo.coordinator.jobs.interface import upgrade_manifest
from myolo.events.payloads.common import Id
from myolo.events.payloads.external import Sha256
from myolo.events.payloads.models import PathOrUrl, Quantization, Text, Watermark

MODEL, VERSION, ALIAS = "model", "version", "alias"
CHAMPION, CHALLENGER = "champion", "challenger"
HISTORY_MAX = 500  # alias history entries kept per alias, newest; older ones are dropped (and counted)
MAX_TAGS = 32
MAX_MANIFEST_CHARS = 256 * 1024  # as myolo.coordinator.jobs.manifest.MAX_MANIFEST_BYTES
Tag = Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$")]
TagValue = Annotated[str, msgspec.Meta(max_length=256)]
Tags = Annotated[dict[Tag, TagValue], msgspec.Meta(max_length=MAX_TAGS)]
Margin = Annotated[float, msgspec.Meta(ge=0.0, lt=1.0)]
CooldownS = Annotated[float, msgspec.Meta(ge=0.0, le=30 * 86_400.0)]
Source = Literal["job", "external"]
log = structlog.get_logger("myolo.coordinator.registry")


class RetrainTemplate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True, frozen=True):
    """What drift-triggered retraining submits for a model. ``manifest`` is an ElasticJob YAML without
    ``metadata.name``, ``spec.trainer.exportPath`` or ``spec.trainer.initFrom``: each run sets them (its job
    name, ``<artifact_dir>/<job name>/model.safetensors``, and the champion's weights when ``from_champion``).
    ``cooldown_s``: at least this long between two retrainings of the model."""

    manifest: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_MANIFEST_CHARS)]
    artifact_dir: PathOrUrl
    from_champion: bool = True
    cooldown_s: CooldownS = 3600.0


class ModelRecord(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """A registered model. ``promote_margin``: a new version whose held-out loss is below the champion's by
    at least this fraction (on the same evaluation dataset, by sha256) becomes champion on its own; None:
    only operators promote. ``quantize_margin``: a quantized version of the champion whose held-out
    perplexity is within this fraction above its source's (measured side by side on the same tokens)
    becomes champion on its own; None: quantized versions are only ever promoted by operators.
    ``latest_version``: the newest version's number (0: none yet)."""

    name: str
    description: Text = ""
    created: float
    updated: float
    by: str
    retrain: RetrainTemplate | None = None
    promote_margin: Margin | None = None
    latest_version: int = 0
    quantize_margin: Margin | None = None

    def upgraded(self) -> ModelRecord:
        """This record as read from the state topic, its template's manifest sectioned if it was stored with a
        flat ``spec.trainer`` (logged, naming the record); what is written next is sectioned."""
        if self.retrain is None:
            return self
        manifest, moved = upgrade_manifest(self.retrain.manifest)
        if not moved:
            return self
        log.info("retraining template read from the flat trainer form", record=f"model/{self.name}", moved=moved)
        return msgspec.structs.replace(self, retrain=msgspec.structs.replace(self.retrain, manifest=manifest))


# ---- evaluation results, in the shape of the Hugging Face model card's ``model-index`` ----------------------
class IndexTask(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    type: str  # e.g. text-generation
    name: str | None = None


class IndexDataset(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """``type`` identifies the dataset (here its path or URL), ``name`` is for people; ``revision`` is the
    dataset's sha256 when known (what auto-promotion compares)."""

    type: str
    name: str
    split: str | None = None
    revision: str | None = None
    args: dict[str, int | float | str] = {}


class IndexMetric(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    type: str  # loss, perplexity
    value: float
    name: str | None = None


class IndexResult(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    task: IndexTask
    dataset: IndexDataset
    metrics: list[IndexMetric] = []


class ModelIndex(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """One entry of ``model-index``: the model's name and its evaluation results."""

    name: str
    results: list[IndexResult] = []


class VersionRecord(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """One version of a model (numbered 1, 2, ... per model), immutable once written but for ``announced``.

    ``source`` is ``job`` when a training job (``job``, ``generation``) produced it, else ``external``.
    ``parent`` is the version it was trained from (lineage), ``drift_event`` the drift detection that caused it,
    ``quantization`` how it was quantized from ``parent`` when it is a quantized model.
    ``metrics`` holds every number given (the evaluation's loss and perplexity included); ``model_index`` the
    held-out evaluation as a model card states it. ``auto_promotion`` says what the promotion rule decided and
    why; ``announced`` is set once its registration event went out (a retried registration sends it again
    until then)."""

    model: str
    version: int
    created: float
    by: str
    source: Source
    artifact: PathOrUrl
    sha256: Sha256
    size_bytes: int | None = None
    steps: int | None = None
    job: Id | None = None
    generation: int | None = None
    data_sha256: Sha256 | None = None
    model_index: list[ModelIndex] = []
    metrics: dict[str, float] = {}
    parent: int | None = None
    drift_event: Id | None = None
    tags: Tags = {}
    description: Text = ""
    auto_promotion: str | None = None
    announced: bool = False
    quantization: Quantization | None = None  # set: a quantized model of ``parent``
    watermark: Watermark | None = None  # set: the weights carry a keyed mark (the key's commitment, never the key)


class AliasChange(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """One move of an alias: to ``version`` (None: removed) from ``previous``, by whom, when and why."""

    version: int | None
    previous: int | None = None
    by: str
    when: float
    reason: str


class AliasRecord(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """An alias of a model (``models:/<model>@<alias>``): the version it points at now (None once removed)
    and its history, oldest first, the newest ``HISTORY_MAX`` entries (``dropped`` counts those let go)."""

    model: str
    alias: str
    version: int | None = None
    history: list[AliasChange] = []
    dropped: int = 0

    def version_at(self, when: float) -> int | None:
        """The version the alias pointed at ``when`` (None: none, or older than the history kept)."""
        current = None
        for change in self.history:
            if change.when > when:
                break
            current = change.version
        return current


Record = ModelRecord | VersionRecord | AliasRecord
KINDS: dict[str, type[msgspec.Struct]] = {MODEL: ModelRecord, VERSION: VersionRecord, ALIAS: AliasRecord}


def version_key(model: str, version: int) -> str:
    return f"{model}:{version}"


def alias_key(model: str, alias: str) -> str:
    return f"{model}@{alias}"


def key_of(record: Record) -> str:
    """The state topic key a record is written under."""
    if isinstance(record, ModelRecord):
        return record.name
    if isinstance(record, VersionRecord):
        return version_key(record.model, record.version)
    return alias_key(record.model, record.alias)


STATE_REGISTRY = "myolo.state.registry"  # the compacted topic they are written to
