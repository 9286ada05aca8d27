"""What the rollouts component's own HTTP routes (and operators' tools through them) ask of it: its rollouts as
records, a new one, and the operator's actions. No other component asks the rollouts component anything."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from myolo.coordinator.rollouts.config import Plan
from myolo.coordinator.rollouts.records import RolloutRecord


@runtime_checkable
class RolloutsAPI(Protocol):
    def rollouts(self) -> tuple[RolloutRecord, ...]:
        """Every rollout, newest first."""

    def rollout(self, name: str) -> RolloutRecord | None: ...

    async def start(
        self, component: str, version: str, artifact: str, sha256: str, by: str, plan: Plan | None = None
    ) -> RolloutRecord:
        """Plan the waves over the fleet's Ready nodes and start; ``RolloutError`` when another rollout is
        active, no node can take it, or an argument is wrong; ``NotLeader`` on a standby."""

    async def act(self, name: str, action: str, by: str) -> RolloutRecord:
        """``pause``, ``resume``, ``abort`` (stop and roll back) or ``undo`` (roll every upgraded node back)."""
