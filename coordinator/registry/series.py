"""The registry's series for ``GET /metrics``: the versions it holds, per model."""

from __future__ import annotations

from typing import Any

from myolo.coordinator.registry.view import RegistryView


def series(view: RegistryView) -> dict[str, list[tuple[tuple[str, ...], Any]]]:
    names = sorted({*view.models, *view.versions})
    return {"myolo_registry_versions": [((n,), float(len(view.versions.get(n, {})))) for n in names]}
