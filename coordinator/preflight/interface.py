"""What the HTTP routes (and other components, e.g. a rollout gate) may ask of the preflight component."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from myolo.coordinator.core.errors import Conflict, NotFound
from myolo.coordinator.preflight.records import PreflightReport, PreflightRequest


@runtime_checkable
class Preflights(Protocol):
    async def preflight(self, request: PreflightRequest, by: str) -> PreflightReport:
        """Run the checklist and report (FAILs are in the report, not raised). Raises ``NotLeader`` on a standby,
        ``UnknownPreflightNode`` for a node the fleet does not know and ``PreflightRefused`` while another run
        goes on or when there is no node to check."""


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
