"""What the core hands each component: time, its config section, durable state, producers, leadership, needs.

Components never reach into each other: a component declares in ``requires`` the narrow interfaces (Protocols)
it depends on, e.g. cordons requires ``FleetNodes``, and takes them with ``ctx.need(FleetNodes)``. The context
holds only the declared ones, so asking for another is an error at start, not a hidden dependency.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from myolo.common.clock import Clock
from myolo.coordinator.core.config import CoreConfig
from myolo.coordinator.core.dashboard import Boards
from myolo.coordinator.core.ingest import IngestHealth
from myolo.coordinator.core.leadership import Leadership
from myolo.coordinator.state import StateStore
from myolo.events.bus import EventProducer

T = TypeVar("T")


class UndeclaredNeed(LookupError):
    """A component asked its context for an interface it does not list in ``requires``."""


@dataclass
class Context:
    component: str  # the name of the component this context is handed to
    instance_id: str
    clock: Clock
    core: CoreConfig
    config: Any  # this component's own section (its declared ``config`` Struct), or None
    store: StateStore
    producer: EventProducer  # plain events
    signed: EventProducer  # signed events (commands to agents)
    leadership: Leadership
    ingest: IngestHealth  # does this coordinator hear the bus (for liveness verdicts)
    needs: Mapping[type, object]  # {interface: the component providing it}, for the interfaces in ``requires``
    boards: Boards = field(default_factory=Boards)  # every component's dashboard declaration and changes (/ui)

    def need(self, interface: type[T]) -> T:
        """The component providing ``interface``, which this component declares in ``requires``."""
        try:
            return cast(T, self.needs[interface])
        except KeyError:
            raise UndeclaredNeed(
                f"component {self.component} asks for {interface.__name__} without declaring it: "
                f"add {interface.__name__} to its requires"
            ) from None
