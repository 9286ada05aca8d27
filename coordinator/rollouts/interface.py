"""What other components may take from the rollouts component: nothing to ask, only the refusals it raises.
Its routes take ``RolloutsAPI`` (``api.py``)."""

from __future__ import annotations

from myolo.coordinator.core.errors import Conflict, Invalid, NotFound


class RolloutError(Invalid):
    """A request the rollouts refuse: ``field`` and the reason."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}", field=field)
        self.reason = reason


class RolloutConflict(Conflict, RolloutError):
    """A request the rollout's state refuses (another one is active, a phase that does not take the action)."""


class UnknownRollout(NotFound, RolloutError):
    """No rollout of that name."""
