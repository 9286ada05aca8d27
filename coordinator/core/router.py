"""Ingest dispatch: each event goes to the components that declared its payload type, in list order.

A component that raises does not stop the others; the router raises :class:`ComponentError` after all ran,
so the consumer retries the event (then dead-letters it), and remembers which components still owe it, so a
retry reaches only those (the ones that succeeded never see an event twice).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

from myolo.coordinator.core.component import Component
from myolo.coordinator.core.errors import ComponentError
from myolo.events.bus import RecordInfo
from myolo.events.envelope import Event
from myolo.events.topics import topic_for_type
from myolo.events.types import type_name

MAX_OWED = 1024  # events with a failed component kept for their retries; the oldest is forgotten first


class EventRouter:
    def __init__(self, components: Sequence[Component], handled: Callable[[str], None] | None = None) -> None:
        """``handled(name)`` is told each component that took an event (the dashboard's changes feed)."""
        self.handled = handled
        self.by_type: dict[str, list[Component]] = {}
        for comp in components:
            for payload in comp.consumes:
                self.by_type.setdefault(type_name(payload), []).append(comp)
        self._owed: OrderedDict[str, set[str]] = OrderedDict()
        self.failures = 0

    def topics(self) -> list[str]:
        """The topics that carry every consumed type (what the ingest consumer subscribes to)."""
        return sorted({topic_for_type(t) for t in self.by_type})

    async def __call__(self, event: Event, info: RecordInfo) -> None:
        owed = self._owed.pop(event.id, None)
        failed: dict[str, BaseException] = {}
        for comp in self.by_type.get(event.type, ()):
            if owed is not None and comp.name not in owed:
                continue
            try:
                await comp.on_event(event, info)
            except Exception as exc:
                failed[comp.name] = exc
                continue
            if self.handled is not None:
                self.handled(comp.name)
        if failed:
            self.failures += 1
            self._owed[event.id] = set(failed)
            while len(self._owed) > MAX_OWED:
                self._owed.popitem(last=False)
            raise ComponentError(failed)
