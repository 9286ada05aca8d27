"""What the drift routes answer beyond their records, and what ``myoloctl drift`` reads."""

from __future__ import annotations

from typing import Literal

import msgspec

from myolo.coordinator.drift.records import RetrainRun, StatusRecord
from myolo.coordinator.drift.rule import DriftRule


class StatusList(msgspec.Struct, kw_only=True):
    """``GET /v1/drift``: the latest evaluation of every watched version, by model then version."""

    items: list[StatusRecord]


class RuleReset(msgspec.Struct, kw_only=True):
    """``DELETE /v1/drift/{model}/rule``: the model is judged by the default rule again."""

    model: str
    rule_source: Literal["default"] = "default"


class ReferenceInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A reference without its values (for listings)."""

    version: str
    feature: str
    kind: str
    count: int
    source: str
    created: float
    by: str


class LearningInfo(msgspec.Struct, kw_only=True):
    """A version whose references are being learned from its first samples."""

    version: str
    features: list[str]  # still gathering their first values
    target: int  # values each learns from (the rule's reference_count)


class DriftView(msgspec.Struct, kw_only=True):
    model: str
    rule: DriftRule
    rule_source: str  # "model" (its own) or "default" (the [drift.rule] section)
    versions: list[StatusRecord]
    references: list[ReferenceInfo]
    learning: list[LearningInfo]
    retrain: RetrainRun | None = None
