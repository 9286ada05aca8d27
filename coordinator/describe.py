"""What each component of a list declares, read from the classes alone (nothing is built or started):
the event types it consumes, the state topics and record kinds it owns, what it needs and from whom, what it
provides, and the routes it serves. ``myolo-coordinator components`` prints it."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from myolo.coordinator.api.openapi import fragment_routes
from myolo.coordinator.core.assembly import check_needs
from myolo.coordinator.core.component import Component
from myolo.events.types import type_name


class Owned(msgspec.Struct, frozen=True, kw_only=True):
    topic: str
    partitions: int
    kinds: tuple[str, ...]


class Need(msgspec.Struct, frozen=True, kw_only=True):
    interface: str
    provider: str


class ComponentInfo(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    consumes: tuple[str, ...]
    owns: tuple[Owned, ...]
    needs: tuple[Need, ...]
    provides: tuple[str, ...]
    serves: tuple[str, ...]  # "METHOD /path", as the component's OpenAPI fragment documents them


def describe(components: Sequence[type[Component]]) -> tuple[ComponentInfo, ...]:
    """The declarations of ``components``, in their order (the assembly checks them first)."""
    offered = check_needs(components)
    return tuple(
        ComponentInfo(
            name=comp.name,
            consumes=tuple(type_name(p) for p in comp.consumes),
            owns=tuple(Owned(topic=st.topic, partitions=st.partitions, kinds=tuple(st.kinds)) for st in comp.owns),
            needs=tuple(Need(interface=n.__name__, provider=offered[n].name) for n in comp.requires),
            provides=tuple(p.__name__ for p in comp.provides),
            serves=fragment_routes(comp.openapi) if comp.openapi is not None else (),
        )
        for comp in components
    )


def render(infos: Sequence[ComponentInfo]) -> str:
    """Plain text: one block per component, one line per declaration ("-" where it declares none)."""
    lines: list[str] = []
    for info in infos:
        owns = [f"{o.topic} ({o.partitions} partitions; kinds: {', '.join(o.kinds)})" for o in info.owns]
        needs = [f"{n.interface} (from {n.provider})" for n in info.needs]
        lines.append(info.name)
        for label, items in (
            ("consumes", info.consumes),
            ("owns", owns),
            ("needs", needs),
            ("provides", info.provides),
            ("serves", info.serves),
        ):
            lines.append(f"  {label:<9} {', '.join(items) or '-'}")
    return "\n".join(lines)
