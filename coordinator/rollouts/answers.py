"""What the API answers for a rollout, and what ``myoloctl rollout`` reads: the state record's spec and status
side by side in one flat object (``name``, ``version``, ``phase``, ``waves``, ...)."""

from __future__ import annotations

import msgspec

from myolo.coordinator.rollouts.config import Plan
from myolo.coordinator.rollouts.records import TERMINAL, Change, Phase, RolloutRecord, Wave
from myolo.events.payloads.models import GateResult


class RolloutAnswer(msgspec.Struct, kw_only=True, frozen=True):
    name: str
    component: str
    version: str
    artifact: str
    sha256: str
    created: float
    updated: float
    by: str
    source: str = "operator"
    plan: Plan = msgspec.field(default_factory=Plan)
    phase: Phase = "Progressing"
    reason: str = ""
    wave: int = 0
    waves: list[Wave] = []
    skipped: dict[str, str] = {}
    failed_gate: GateResult | None = None
    taken_back: dict[str, str] = {}
    ending: Phase = "RolledBack"
    history: list[Change] = []

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL


def rollout_answer(rec: RolloutRecord) -> RolloutAnswer:
    """The record as the API answers it (a field added to the spec or status and not here fails loudly)."""
    return RolloutAnswer(
        name=rec.name, created=rec.created, **msgspec.structs.asdict(rec.spec), **msgspec.structs.asdict(rec.status)
    )


class RolloutList(msgspec.Struct, kw_only=True):
    items: list[RolloutAnswer]
