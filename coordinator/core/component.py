"""What a coordinator component is: what it declares, and the hooks the core calls.

A component declares, as class attributes, the event payloads it consumes, the compacted state topics it owns
(with the record kinds written there), its configuration section and its OpenAPI fragment; it implements the
hooks it needs (events, state records, ticks, leadership, HTTP routes). The core reads the declarations to
build one consumer, one state tail, one config schema and one API, so adding a component is adding a folder
and one line in ``coordinator/components.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import msgspec
from aiohttp import web

from events.bus import RecordInfo
from events.envelope import Event
from events.payloads import Payload

if TYPE_CHECKING:
    from coordinator.core.context import Context


@dataclass(frozen=True)
class StateTopic:
    """A compacted topic a component owns, and the record kinds (``{kind: Struct}``) it writes there."""

    topic: str
    kinds: dict[str, type[msgspec.Struct]]


@dataclass(frozen=True)
class RouteSet:
    """A component's part of the HTTP API: its routes, their OpenAPI fragment, and what it adds to /healthz.

    ``admin_routes`` lists the routes only an admin token may call, as (METHOD, path pattern exactly as
    registered in aiohttp), e.g. ``("PUT", "/v1/nodes/{node}/key")``; every other route needs a viewer for
    GET/HEAD and an operator for any other method. A write's body must be ``application/json``; ``body_types``
    names the routes that take other content types too, ``{(METHOD, path pattern): accepted types}``.
    """

    routes: list[web.RouteDef]
    openapi: Path | None = None
    health: Callable[[], dict[str, Any]] = field(default=dict)
    admin_routes: tuple[tuple[str, str], ...] = ()
    body_types: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)


class Component:
    """Base of every component: declarations empty, hooks that do nothing. Override what you need."""

    name: ClassVar[str]
    config: ClassVar[type[msgspec.Struct] | None] = None  # the [name] section of coordinator.toml
    consumes: ClassVar[tuple[type[Payload], ...]] = ()
    # payloads this component vouches for: each event of these types goes through ``verify`` before any
    # component sees it, and is dead-lettered with the reason when it raises (nodes: node signatures)
    guards: ClassVar[tuple[type[Payload], ...]] = ()
    owns: ClassVar[tuple[StateTopic, ...]] = ()
    openapi: ClassVar[Path | None] = None  # the OpenAPI fragment describing the routes of ``api()``

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @classmethod
    def check_config(cls, section: Any, core: Any) -> None:
        """Checks across keys (or against the core's, e.g. ``tick_s``); raise ``ConfigError`` naming the key."""

    def verify(self, event: Event) -> None:
        """One event of a guarded type, before any component handles it: raise ``InvalidEvent`` to refuse it.
        Runs on the ingest path of every event of those types: keep it fast, and never wait."""

    async def on_event(self, event: Event, info: RecordInfo) -> None:
        """One event of a consumed type. Raising makes the core retry this component (only) for the event."""

    def on_state(self, topic: str, key: str, record: msgspec.Struct | None, kind: str) -> None:
        """A record of an owned state topic, in log order (None: a tombstone), at start and while following."""

    async def on_lead(self, epoch: int) -> None:
        """This coordinator starts leading in ``epoch`` (the term is recorded already)."""

    def on_step_down(self) -> None:
        """Leadership ended: stop deciding at once."""

    async def tick(self, now: float) -> None:
        """Every ``tick_s`` of the coordinator's clock, on every coordinator (leading or not)."""

    def background(self) -> dict[str, Callable[[], Awaitable[None]]]:
        """Long-running tasks to start with the coordinator, by name (e.g. a writer draining a queue)."""
        return {}

    def api(self) -> RouteSet | None:
        """This component's HTTP routes, or None."""
        return None

    def stats(self) -> dict[str, int]:
        """Counters for the status snapshot and tests."""
        return {}

    def status(self) -> dict[str, Any]:
        """Larger views for the status snapshot (lists of nodes, commands), JSON-ready."""
        return {}
