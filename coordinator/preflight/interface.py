"""What other components may take from the preflight component: nothing to ask, only the refusals it raises.
Its route takes ``Preflights`` (``api.py``)."""

from __future__ import annotations

from myolo.coordinator.core.errors import Conflict, NotFound


class UnknownPreflightNode(NotFound):
    def __init__(self, node_id: str, field: str) -> None:
        hint = "`myoloctl get nodes` lists the nodes by id"
        super().__init__(f"node {node_id!r} is not in the fleet view", field=field, hint=hint)
        self.node_id = node_id


class PreflightRefused(Conflict):
    """Nothing was checked: ``reason`` says why and ``hint`` what to do."""

    def __init__(self, reason: str, hint: str, field: str | None = None) -> None:
        super().__init__(reason, field=field, hint=hint)
        self.reason = reason
