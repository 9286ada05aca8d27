"""What a component shows on the dashboard (``/ui``), and how the dashboard hears that it changed.

A component declares, through its ``dashboard()`` hook, the pages it offers (each read from memory as a
msgspec Struct, optionally for one key such as a node id or a job name) and the moments it adds to the events
timeline. ``/ui`` learns the pages, the menu and the timeline from these declarations only. The core reports
which component changed (it handled an event, or took a record of its state topic) to ``Boards``, which the
dashboard listens to for its server-sent events: it never polls the components.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog

log = structlog.get_logger("myolo.coordinator.dashboard")


class Moment(msgspec.Struct, kw_only=True, frozen=True):
    """One entry of the events timeline: a fault, a decision, a rollout's step, a detection, a registration."""

    time: float
    kind: str  # fault | decision | rollout | drift | registration | cordon
    subject: str  # the node, job, rollout or model it is about
    text: str
    component: str = ""  # filled in by the dashboard from the declaring component


@dataclass(frozen=True)
class Panel:
    """One page a component offers: ``name`` is its address (``/ui/<name>``), ``title`` its entry in the menu
    (empty: reached by a link only, e.g. one node), ``read(key)`` its data from memory (None: no such key)."""

    name: str
    title: str
    read: Callable[[str | None], msgspec.Struct | None]
    keyed: bool = False  # the page is about one thing (its ``?key=``), e.g. a node or a job


@dataclass(frozen=True)
class Dashboard:
    """A component's declaration for ``/ui``: its pages and, optionally, its moments for the timeline."""

    panels: tuple[Panel, ...] = ()
    timeline: Callable[[], Iterable[Moment]] | None = None


@dataclass
class Boards:
    """The components' declarations (filled once every component is built) and the feed of their changes.

    ``changed(name)`` is called by the core on the event path: a listener must be quick and never wait."""

    parts: Mapping[str, Dashboard] = field(default_factory=dict)
    _listeners: list[Callable[[str], None]] = field(default_factory=list)

    def listen(self, listener: Callable[[str], None]) -> None:
        self._listeners.append(listener)

    def changed(self, component: str) -> None:
        for listener in self._listeners:
            try:
                listener(component)
            except Exception:  # the dashboard's bug must never fail an event or a state record
                log.exception("dashboard listener failed", component=component)

    def panel(self, name: str) -> tuple[str, Panel] | None:
        """(the declaring component, the panel) of the page called ``name``."""
        for comp, part in self.parts.items():
            for p in part.panels:
                if p.name == name:
                    return comp, p
        return None

    def moments(self, limit: int) -> list[Moment]:
        """The newest ``limit`` moments of every component's timeline, newest first."""
        out: list[Moment] = []
        for comp, part in self.parts.items():
            if part.timeline is None:
                continue
            try:
                out.extend(msgspec.structs.replace(m, component=comp) for m in part.timeline())
            except Exception:
                log.exception("dashboard timeline failed", component=comp)
        out.sort(key=lambda m: m.time, reverse=True)
        return out[:limit]


def collect(components: Iterable[Any]) -> dict[str, Dashboard]:
    """``{name: declaration}`` of the components that declare one (their ``dashboard()`` hook)."""
    out: dict[str, Dashboard] = {}
    seen: dict[str, str] = {}
    for comp in components:
        part = comp.dashboard()
        if part is None:
            continue
        name = type(comp).name
        for p in part.panels:
            if p.name in seen:
                raise ValueError(f"dashboard page {p.name!r} is declared by both {seen[p.name]} and {name}")
            seen[p.name] = name
        out[name] = part
    return out
