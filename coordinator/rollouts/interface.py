"""What the HTTP routes (and operators' tools) may ask of the rollouts component."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from myolo.coordinator.core.errors import Conflict, Invalid, NotFound
from myolo.coordinator.rollouts.config import Plan
from myolo.coordinator.rollouts.records import RolloutRecord


class RolloutError(Invalid):
    """A request the rollouts refuse: ``field`` and the reason."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}", field=field)
        self.reason = reason


class RolloutConflict(Conflict, RolloutError):
    """A request the rollout's state refuses (another one is active, a phase that does not take the action)."""


class UnknownRollout(NotFound, RolloutError):
    """No rollout of that name."""


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
