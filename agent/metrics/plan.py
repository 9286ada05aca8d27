"""The agent's metrics, planned once from the mapping file and the sources: for each metric, its labels, its
source, and the factor from the source's unit to the scraped unit and to the OpenTelemetry unit. Both the
Prometheus page and the OpenTelemetry instruments walk this one plan.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from myolo.agent.metrics.sources import SOURCES, Source, View
from myolo.common.metrics import units
from myolo.common.metrics.mapping import Mapping, MappingError, MetricSpec, load
from myolo.events.payloads import GpuReading

GPU_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION", "node")
NODE_LABELS = ("Hostname", "node")


@dataclass(frozen=True)
class Planned:
    spec: MetricSpec
    source: Source
    labels: tuple[str, ...]  # the scope's identity labels, then the source's by-labels
    scale: float  # source unit -> the scraped unit
    otel_scale: float  # source unit -> the OpenTelemetry unit


def plan(mapping: Mapping | None = None, sources: dict[str, Source] | None = None) -> list[Planned]:
    """Raises :class:`MappingError` naming every agent metric whose source is unknown or does not convert."""
    mapping = mapping or load()
    sources = SOURCES if sources is None else sources
    out, problems = [], []
    for scope, want in (("gpu", GPU_LABELS), ("node", NODE_LABELS)):
        if tuple(mapping.scopes.get(scope, ())) != want:  # type: ignore[call-overload]
            problems.append(f"scopes.{scope}: the agent writes the labels {list(want)}, in that order")
    for spec in mapping.for_component("agent"):
        src = sources.get(spec.source)
        if src is None:
            problems.append(f"metric {spec.name!r}: the agent has no source {spec.source!r}")
            continue
        if (spec.scope == "gpu") != (src.gpu is not None):
            problems.append(f"metric {spec.name!r}: scope {spec.scope!r} does not fit source {spec.source!r}")
            continue
        try:
            scale, otel_scale = units.scale(src.unit, spec.unit), units.scale(src.unit, spec.otel.unit)
        except ValueError as exc:
            problems.append(f"metric {spec.name!r}: source {spec.source!r}: {exc}")
            continue
        out.append(Planned(spec, src, tuple(mapping.labels_of(spec)), scale, otel_scale))
    if problems:
        raise MappingError("; ".join(problems))
    return out


def gpu_identity(g: GpuReading, view: View) -> tuple[str, ...]:
    """The GPU scope's label values, in the order of :data:`GPU_LABELS`."""
    sample = view.sample
    minor = g.minor_number if g.minor_number is not None else g.index
    return (
        str(g.index),
        g.uuid,
        g.pci_bus_id or "",
        f"nvidia{minor}",
        g.name,
        view.hostname,
        (sample.driver_version if sample else None) or "",
        sample.node_id if sample else "",
    )


def node_identity(view: View) -> tuple[str, ...]:
    """The node scope's label values, in the order of :data:`NODE_LABELS`."""
    return (view.hostname, view.sample.node_id if view.sample else "")


def series(p: Planned, view: View) -> Iterator[tuple[tuple[str, ...], float]]:
    """Every series of one metric, label values in the order of ``p.labels``, values in the source's unit."""
    if p.source.gpu is not None:
        for g in view.sample.gpus if view.sample else ():
            ident = gpu_identity(g, view)
            for by, value in p.source.gpu(g, view):
                yield (*ident, *by), value
    elif p.source.node is not None:
        ident = node_identity(view)
        for by, value in p.source.node(view):
            yield (*ident, *by), value
