"""What the drift component's own HTTP routes ask of it: its evaluations and references as records, and the
operator's writes. Other components ask the drift component nothing."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from myolo.coordinator.drift.answers import DriftView
from myolo.coordinator.drift.records import ReferenceRecord, RuleRecord, StatusRecord
from myolo.coordinator.drift.reference import CategoricalReference, NumericReference
from myolo.coordinator.drift.rule import DriftRule


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
