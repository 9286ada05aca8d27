"""What other components may ask of the fleet: its nodes, the cordon state it shows, and its changes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from myolo.coordinator.fleet.model import Cordon, Liveness, NodeState
from myolo.events.envelope import Event

__all__ = ["Applied", "Changed", "Cordon", "FleetNodes", "NodeState", "Transition"]


@dataclass(frozen=True)
class Transition:
    """A node's liveness changed (``silent_s``: how long it had been silent when it did)."""

    node: NodeState
    before: Liveness
    after: Liveness
    silent_s: float


Applied = Callable[[NodeState, Event], None]
Changed = Callable[[Transition], None]


@runtime_checkable
class FleetNodes(Protocol):
    def node(self, node_id: str) -> NodeState | None: ...

    def nodes(self) -> tuple[NodeState, ...]: ...

    def set_cordon(self, cordon: Cordon) -> None:
        """Show a cordon decision on the node (the component that decides it keeps the record)."""

    def clear_cordon(self, node_id: str) -> None: ...

    def on_applied(self, listener: Applied) -> None:
        """Call ``listener(node, event)`` after each event the view accepted (never for flagged ones)."""

    def on_liveness(self, listener: Changed) -> None:
        """Call ``listener(transition)`` for every liveness change, after the node was updated."""
