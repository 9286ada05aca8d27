"""What the drift component writes to ``myolo.state.drift``: references, per-model rules, the latest
evaluation of each monitored version, and each model's retraining run.

Keys start with the record's kind so one model's records sit side by side: ``ref/<model>/<version>/<feature
hash>`` (one feature per record, so a record stays far below Kafka's message limit), ``rule/<model>``,
``status/<model>/<version>``, ``retrain/<model>``.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import msgspec

from myolo.coordinator.drift.reference import CategoricalReference, NumericReference, Reference
from myolo.coordinator.drift.rule import DriftRule
from myolo.events.payloads.models import FeatureDrift, ModelExport

MAX_DETECTIONS = 20  # the newest detection ids kept on a status record


class ReferenceRecord(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """One feature's reference distribution for one version of a model."""

    model: str
    version: str
    feature: str
    numeric: NumericReference | None = None
    categorical: CategoricalReference | None = None
    source: str  # "file:<name>" or "learned"
    created: float
    by: str = "auto"

    @classmethod
    def of(cls, model: str, version: str, feature: str, ref: Reference, **kw: Any) -> ReferenceRecord:
        """The record of one reference, in the field its kind goes to."""
        numeric = ref if isinstance(ref, NumericReference) else None
        categorical = ref if isinstance(ref, CategoricalReference) else None
        return cls(model=model, version=version, feature=feature, numeric=numeric, categorical=categorical, **kw)

    @property
    def reference(self) -> Reference | None:
        return self.numeric or self.categorical


class RuleRecord(msgspec.Struct, kw_only=True, frozen=True):
    """A model's own drift rule (without one, the ``[drift]`` section's default applies)."""

    model: str
    rule: DriftRule
    by: str
    updated: float


class StatusRecord(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """The latest evaluation of one version: each feature's statistics and whether the rule fired."""

    model: str
    version: str
    evaluated_at: float
    window_start: float
    window_end: float
    share: float
    drifted: bool
    consecutive: int
    features: list[FeatureDrift] = []
    missing: list[str] = []  # features of the window without a reference
    detections: list[str] = []  # the newest detection ids, oldest first


RunState = Literal["running", "registered", "failed"]


class RetrainRun(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """The newest retraining job a drift caused for a model (one at a time per model)."""

    model: str
    job: str
    detection_id: str
    version: str  # the drifted version
    parent: int | None = None  # the registry version it started from (the champion), if any
    submitted: float
    state: RunState = "running"
    reason: str = ""
    generation: int | None = None
    export: ModelExport | None = None
    registered: int | None = None  # the registry version it became


def feature_key(feature: str) -> str:
    return hashlib.sha256(feature.encode()).hexdigest()[:16]


def reference_key(model: str, version: str, feature: str) -> str:
    return f"ref/{model}/{version}/{feature_key(feature)}"


def rule_key(model: str) -> str:
    return f"rule/{model}"


def status_key(model: str, version: str) -> str:
    return f"status/{model}/{version}"


def retrain_key(model: str) -> str:
    return f"retrain/{model}"


STATE_DRIFT = "myolo.state.drift"  # the compacted topic they are written to
