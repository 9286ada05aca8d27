"""One OpenAPI document from the core's part and the fragment of each component.

A fragment holds ``paths`` and ``components`` only. A path or a named component defined twice must be
identical (components share ``NodeId``, say); anything else is an error at start, naming what clashes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from myolo.coordinator.core.component import Component

CORE_OPENAPI = Path(__file__).with_name("openapi.yaml")


@cache
def _load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def assemble(fragments: Iterable[Path]) -> dict[str, Any]:
    doc = copy.deepcopy(_load(CORE_OPENAPI))
    for path in fragments:
        part = _load(path)
        unknown = set(part) - {"paths", "components"}
        if unknown:
            raise ValueError(f"{path}: an OpenAPI fragment has only paths and components, not {sorted(unknown)}")
        _merge(doc.setdefault("paths", {}), part.get("paths", {}), f"{path}: paths")
        for group, items in part.get("components", {}).items():
            target = doc.setdefault("components", {}).setdefault(group, {})
            _merge(target, items, f"{path}: components.{group}")
    return doc


def fragment_routes(path: Path) -> tuple[str, ...]:
    """The routes a fragment documents, as ``"METHOD /path"``, in the fragment's order."""
    methods = ("get", "put", "post", "delete", "patch", "head")
    paths = _load(path).get("paths", {})
    return tuple(f"{m.upper()} {p}" for p, ops in paths.items() for m in ops if m in methods)


def _merge(into: dict[str, Any], items: dict[str, Any], where: str) -> None:
    for name, value in items.items():
        if name in into and into[name] != value:
            raise ValueError(f"{where}.{name} is defined differently elsewhere; define it once")
        into[name] = value


def for_components(components: Iterable[type[Component]]) -> dict[str, Any]:
    """The document of a coordinator built from these component classes."""
    return assemble(c.openapi for c in components if c.openapi is not None)
