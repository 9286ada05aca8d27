"""Reading the components' declarations: names, who owns which state topic, which record kinds exist, and
who needs what from whom.

Checked once at start, before anything is built, so two components that claim one topic, one kind name or one
component name, a need nobody provides, a need provided only by a component listed later, or two components
needing each other fail the start with a message naming both, instead of misrouting records later.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from myolo.coordinator.core.component import Component, StateTopic


class AssemblyError(ValueError):
    """The component list cannot be assembled; the message names the components and the fix."""


def check_names(components: Sequence[type[Component]]) -> None:
    seen: set[str] = set()
    for comp in components:
        name = getattr(comp, "name", None)
        if not name:
            raise AssemblyError(f"component {comp.__qualname__} declares no name")
        if name in seen:
            raise AssemblyError(f"two components are named {name!r}")
        seen.add(name)


def state_owners(core: StateTopic, components: Sequence[type[Component]]) -> dict[str, str]:
    """``{topic: owner name}``; the core owns its own topic under the name ``core``."""
    owners = {core.topic: "core"}
    for comp in components:
        for st in comp.owns:
            if st.topic in owners:
                raise AssemblyError(f"state topic {st.topic!r} is claimed by both {owners[st.topic]} and {comp.name}")
            owners[st.topic] = comp.name
    return owners


def state_kinds(core: StateTopic, components: Sequence[type[Component]]) -> dict[str, type[msgspec.Struct]]:
    kinds = dict(core.kinds)
    for comp in components:
        for st in comp.owns:
            for kind, cls in st.kinds.items():
                if kind in kinds:
                    raise AssemblyError(f"state kind {kind!r} of {comp.name} is already registered")
                kinds[kind] = cls
    return kinds


def state_topics(core: StateTopic, components: Sequence[type[Component]]) -> tuple[StateTopic, ...]:
    """Every state topic: the core's first, then each component's, in list order (ownership checked)."""
    state_owners(core, components)
    return (core, *(st for comp in components for st in comp.owns))


def members(interface: type) -> list[str]:
    """The public attributes an interface (a Protocol) asks of whoever provides it."""
    names: set[str] = set()
    for klass in interface.__mro__:
        if klass is object or klass.__name__ in ("Protocol", "Generic"):
            continue
        names.update(n for n in (*vars(klass), *getattr(klass, "__annotations__", {})) if not n.startswith("_"))
    return sorted(names)


def providers(components: Sequence[type[Component]]) -> dict[type, type[Component]]:
    """``{interface: the component providing it}``; an interface offered twice, or a component lacking what its
    ``provides`` promises, is refused."""
    out: dict[type, type[Component]] = {}
    for comp in components:
        for interface in comp.provides:
            if interface in out:
                raise AssemblyError(
                    f"{interface.__name__} is provided by both {out[interface].name} and {comp.name}: keep one"
                )
            lacking = [m for m in members(interface) if not hasattr(comp, m)]
            if lacking:
                raise AssemblyError(
                    f"{comp.name} declares it provides {interface.__name__} but lacks {', '.join(lacking)}"
                )
            out[interface] = comp
    return out


def check_needs(components: Sequence[type[Component]]) -> dict[type, type[Component]]:
    """Each need of each component provided by a component listed before it; returns :func:`providers`.

    A missing need names the component and the interface; a circle names the components on it (no order of
    the list can build them); a need provided only later names both and says which to move."""
    order = {comp: i for i, comp in enumerate(components)}
    offered = providers(components)
    for comp in components:
        for need in comp.requires:
            if need not in offered:
                raise AssemblyError(
                    f"{comp.name} requires {need.__name__}, which no component provides "
                    f"(listed: {', '.join(c.name for c in components)})"
                )
    circle = _circle(components, offered)
    if circle:
        steps = [f"{a.name} requires {need.__name__} from {b.name}" for a, need, b in circle]
        raise AssemblyError(f"circular need between {' and '.join(a.name for a, _, _ in circle)}: {'; '.join(steps)}")
    for comp in components:
        for need in comp.requires:
            giver = offered[need]
            if order[giver] >= order[comp]:
                raise AssemblyError(
                    f"{comp.name} requires {need.__name__} from {giver.name}, which is listed after it: "
                    f"list {giver.name} before {comp.name}"
                )
    return offered


def _circle(
    components: Sequence[type[Component]], offered: dict[type, type[Component]]
) -> list[tuple[type[Component], type, type[Component]]]:
    """One circle of needs (each step: who requires what from whom), or [] when there is none."""
    state: dict[type[Component], int] = {}  # 1: on the current path, 2: done
    path: list[tuple[type[Component], type, type[Component]]] = []

    def visit(comp: type[Component]) -> list[tuple[type[Component], type, type[Component]]]:
        state[comp] = 1
        for need in comp.requires:
            giver = offered[need]
            path.append((comp, need, giver))
            if state.get(giver) == 1:
                start = next(i for i, (a, _, _) in enumerate(path) if a is giver)
                return path[start:]
            if giver not in state:
                found = visit(giver)
                if found:
                    return found
            path.pop()
        state[comp] = 2
        return []

    for comp in components:
        if comp not in state:
            found = visit(comp)
            if found:
                return found
    return []
