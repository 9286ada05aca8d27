"""What a coordinator component is: what it declares, and the hooks the core calls.

A component declares, as class attributes, the event payloads it consumes, the compacted state topics it owns
(with the record kinds written there and what creating the topic needs), the interfaces it requires from other
components and those it provides, its configuration section and its OpenAPI fragment; it implements the hooks
it needs (events, state records, ticks, leadership, HTTP routes). The core reads the declarations to build one
consumer, one state tail, one config schema and one API; backup, restore and topic creation read the state
topics from them. Adding a component is adding a folder and one line in the list the daemon is assembled from
(``coordinator/components.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

import msgspec
from aiohttp import web

from myolo.coordinator.core.context import Context
from myolo.coordinator.core.dashboard import Dashboard
from myolo.events.bus import RecordInfo
from myolo.events.envelope import Event
from myolo.events.payloads import Payload
from myolo.events.topics import Topic


@dataclass(frozen=True)
class StateTopic:
    """A compacted topic a component owns: the record kinds (``{kind: Struct}``) it writes there, and what
    creating the topic needs (partitions, what it is keyed by, compaction settings beyond the defaults)."""

    topic: str
    kinds: Mapping[str, type[msgspec.Struct]]
    partitions: int = 1
    key: str = "record key"
    description: str = ""
    extra: Mapping[str, str] = field(default_factory=dict)  # topic configs, e.g. {"segment.ms": "600000"}
    backup: bool = True  # in a backup that names no topics (False: restoring it would replay stale intents)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kinds", MappingProxyType(dict(self.kinds)))
        object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))

    def spec(self) -> Topic:
        """The compacted topic as ``myolo.events.topics.ensure_topics`` creates it."""
        return Topic(
            self.topic,
            self.partitions,
            self.key,
            retention_ms=None,
            compacted=True,
            description=self.description,
            extra=dict(self.extra),
        )


@dataclass(frozen=True)
class RouteSet:
    """A component's part of the HTTP API: its routes, their OpenAPI fragment, and what it adds to /healthz.

    ``admin_routes`` lists the routes only an admin token may call, as (METHOD, path pattern exactly as
    registered in aiohttp), e.g. ``("PUT", "/v1/nodes/{node}/key")``; every other route needs a viewer for
    GET/HEAD and an operator for any other method, unless listed in ``open_routes``. A write's body must be
    ``application/json``; ``body_types`` names the routes that take other content types too,
    ``{(METHOD, path pattern): accepted types}``.
    """

    routes: list[web.RouteDef]
    openapi: Path | None = None
    health: Callable[[], dict[str, Any]] = field(default=dict)
    admin_routes: tuple[tuple[str, str], ...] = ()
    body_types: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    # routes answered without a token: pages and assets that hold no data, a login form
    open_routes: tuple[tuple[str, str], ...] = ()
    # a browser's session (a cookie) instead of a bearer token, for this set's GET and HEAD routes only:
    # (the token's name, the role granted) or None; a request with an Authorization header never uses it
    session: Callable[[web.Request], tuple[str, str] | None] | None = None


class Component:
    """Base of every component: declarations empty, hooks that do nothing. Override what you need."""

    name: ClassVar[str]
    config: ClassVar[type[msgspec.Struct] | None] = None  # the [name] section of coordinator.toml
    consumes: ClassVar[tuple[type[Payload], ...]] = ()
    # payloads this component vouches for: each event of these types goes through ``verify`` before any
    # component sees it, and is dead-lettered with the reason when it raises (nodes: node signatures)
    guards: ClassVar[tuple[type[Payload], ...]] = ()
    owns: ClassVar[tuple[StateTopic, ...]] = ()
    # the interfaces (Protocols) this component takes from others with ``ctx.need``, and those it offers:
    # the assembly checks them before building anything (each need provided by a component listed before)
    requires: ClassVar[tuple[type, ...]] = ()
    provides: ClassVar[tuple[type, ...]] = ()
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

    def metrics(self) -> Mapping[str, Iterable[tuple[tuple[str, ...], Any]]]:
        """Series for ``GET /metrics``, by their name in ``common/metrics/mapping.toml`` (component
        ``coordinator``): each ``(values of the metric's by-labels, value)``. Read from memory only."""
        return {}

    def dashboard(self) -> Dashboard | None:
        """What ``/ui`` shows of this component (``core/dashboard.py``): its pages, read from memory as msgspec
        Structs, and its moments for the events timeline. Called once, when the coordinator is assembled."""
        return None

    def status(self) -> dict[str, Any]:
        """Larger views for the status snapshot (lists of nodes, commands), JSON-ready."""
        return {}
