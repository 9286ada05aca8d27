"""What the HTTP routes may ask of the drift component."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import msgspec

from myolo.coordinator.drift.records import ReferenceRecord, RetrainRun, RuleRecord, StatusRecord
from myolo.coordinator.drift.reference import CategoricalReference, NumericReference
from myolo.coordinator.drift.rule import DriftRule


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


@runtime_checkable
class DriftAPI(Protocol):
    def summary(self) -> tuple[StatusRecord, ...]:
        """The latest evaluation of every watched version, by model then version."""

    def view(self, model: str) -> DriftView:
        """Everything known of one model's drift (empty lists and the default rule for a model not seen)."""

    async def set_reference(
        self,
        model: str,
        version: str | None,
        feature: str,
        reference: NumericReference | CategoricalReference,
        source: str,
        by: str,
    ) -> ReferenceRecord:
        """Set one feature's reference (``version`` None: the champion's); ``ValueError`` naming the field."""

    async def set_rule(self, model: str, rule: DriftRule | None, by: str) -> RuleRecord | None:
        """The model's own rule, or (None) back to the default."""
