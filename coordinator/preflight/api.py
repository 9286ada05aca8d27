"""What the preflight component's own HTTP route asks of it: a checklist run, answered with its report. No other
component asks the preflight component anything."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from myolo.coordinator.preflight.records import PreflightReport, PreflightRequest


@runtime_checkable
class Preflights(Protocol):
    async def preflight(self, request: PreflightRequest, by: str) -> PreflightReport:
        """Run the checklist and report (FAILs are in the report, not raised). Raises ``NotLeader`` on a standby,
        ``UnknownPreflightNode`` for a node the fleet does not know and ``PreflightRefused`` while another run
        goes on or when there is no node to check."""
