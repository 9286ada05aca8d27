"""Reading the components' declarations: who owns which state topic, which record kinds exist.

Checked once at start, so two components that claim one topic, one kind name or one component name fail
the start with a message naming both, instead of misrouting records later.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from coordinator.core.component import Component, StateTopic


def check_names(components: Sequence[type[Component]]) -> None:
    seen: set[str] = set()
    for comp in components:
        name = getattr(comp, "name", None)
        if not name:
            raise ValueError(f"component {comp.__qualname__} declares no name")
        if name in seen:
            raise ValueError(f"two components are named {name!r}")
        seen.add(name)


def state_owners(core: StateTopic, components: Sequence[type[Component]]) -> dict[str, str]:
    """``{topic: owner name}``; the core owns its own topic under the name ``core``."""
    owners = {core.topic: "core"}
    for comp in components:
        for st in comp.owns:
            if st.topic in owners:
                raise ValueError(f"state topic {st.topic!r} is claimed by both {owners[st.topic]} and {comp.name}")
            owners[st.topic] = comp.name
    return owners


def state_kinds(core: StateTopic, components: Sequence[type[Component]]) -> dict[str, type[msgspec.Struct]]:
    kinds = dict(core.kinds)
    for comp in components:
        for st in comp.owns:
            for kind, cls in st.kinds.items():
                if kind in kinds:
                    raise ValueError(f"state kind {kind!r} of {comp.name} is already registered")
                kinds[kind] = cls
    return kinds
