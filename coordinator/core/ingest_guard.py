"""The ingest consumer's verifier: each event of a guarded type passes every component guarding it (see
``Component.guards``) before the router hands it to anyone, so a refused event is dead-lettered with its
reason and no component ever acts on it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from myolo.coordinator.core.component import Component
from myolo.events.envelope import Event
from myolo.events.types import type_name


class IngestGuard:
    def __init__(self, components: Sequence[Component], must_guard: Collection[str] = ()) -> None:
        """``must_guard``: event types no component may consume unless one guards them (a coordinator that
        would act on unsigned node faults refuses to start instead)."""
        self.by_type: dict[str, list[Component]] = {}
        for comp in components:
            for payload in comp.guards:
                self.by_type.setdefault(type_name(payload), []).append(comp)
        for comp in components:
            for payload in comp.consumes:
                kind = type_name(payload)
                if kind in must_guard and kind not in self.by_type:
                    raise ValueError(
                        f"component {comp.name} consumes {kind}, which must be verified before anyone acts on it, "
                        "but no component guards it: list myolo.coordinator.nodes in coordinator/components.py"
                    )

    def verify(self, event: Event) -> None:
        """Raise ``InvalidEvent`` (the consumer dead-letters the record) when a guard refuses the event."""
        for comp in self.by_type.get(event.type, ()):
            comp.verify(event)
