"""What the core hands each component: time, its config section, durable state, producers, leadership, peers.

Components never reach into each other: a component that needs another asks ``peers.require(Interface)`` for
the narrow interface (a Protocol) it depends on, e.g. cordons asks for ``FleetNodes``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from coordinator.core.ingest import IngestHealth
from coordinator.core.leadership import Leadership
from coordinator.state import StateStore
from events.bus import EventProducer
from events.clock import Clock

if TYPE_CHECKING:
    from coordinator.config import CoreConfig
    from coordinator.core.component import Component

T = TypeVar("T")


@dataclass
class Peers:
    """The components built so far, in the order of ``coordinator/components.py``."""

    built: list[Component] = field(default_factory=list)

    def require(self, interface: type[T]) -> T:
        """The first component providing ``interface`` (a runtime-checkable Protocol or a class)."""
        for comp in self.built:
            if isinstance(comp, interface):
                return comp
        names = [type(c).name for c in self.built]
        raise LookupError(
            f"no component provides {interface.__name__} (built so far: {names}); list the component that "
            "provides it before the one that needs it in coordinator/components.py"
        )

    def __iter__(self) -> Iterator[Component]:
        return iter(self.built)


@dataclass
class Context:
    instance_id: str
    clock: Clock
    core: CoreConfig
    config: Any  # this component's own section (its declared ``config`` Struct), or None
    store: StateStore
    producer: EventProducer  # plain events
    signed: EventProducer  # signed events (commands to agents)
    leadership: Leadership
    peers: Peers
    ingest: IngestHealth  # does this coordinator hear the bus (for liveness verdicts)
