"""What the HTTP API needs from a coordinator: fleet reads, who leads, and the two operator writes.

The API depends on this small surface (which coordinator.service.CoordinatorService offers) instead of on
the whole service, so it can be tested with an in-memory fleet. Writes raise the service's own errors:
``NotLeader`` (answered with 307 to the leader) and ``UnknownNode`` (404).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from coordinator.fleet.model import CordonRecord, NodeState
from coordinator.leader.errors import NotLeader, UnknownNode
from events.clock import Clock

__all__ = ["FleetService", "LeaderView", "NotLeader", "UnknownNode"]


class LeaderView(Protocol):
    """The current leadership term as a coordinator knows it."""

    @property
    def instance_id(self) -> str: ...

    @property
    def epoch(self) -> int: ...

    @property
    def api_url(self) -> str: ...


class FleetService(Protocol):
    """The coordinator as the API sees it."""

    instance_id: str
    clock: Clock  # ages of samples are computed on the service's clock, not the caller's
    started: asyncio.Event  # set once the state topics are read and every component runs

    @property
    def is_leader(self) -> bool: ...

    def nodes(self) -> list[NodeState]: ...

    def node(self, node_id: str) -> NodeState | None: ...

    def leader_info(self) -> LeaderView | None:
        """This coordinator's term while it leads, else the last term recorded by anyone (None: never)."""

    async def cordon(self, node_id: str, reason: str, by: str) -> CordonRecord:
        """Record the cordon durably (state topic first), then apply it. Raises NotLeader, UnknownNode."""

    async def uncordon(self, node_id: str, reason: str, by: str) -> CordonRecord: ...
