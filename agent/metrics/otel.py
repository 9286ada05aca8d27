"""The agent's metrics as OpenTelemetry instruments (the ``hw.*`` conventions where they exist, ``myolo.*``
where they do not), one observable instrument per OpenTelemetry name of the mapping file.

The callbacks run on the metric reader's thread: they read the view the Prometheus page reads (the last
sample and counters in memory), never NVML, and convert each value from its source's unit to the mapping's
OpenTelemetry unit. Attributes are the mapping's fixed ones plus each label translated (``gpu`` ->
``myolo.gpu.index``); a label with no value (a PCI address the GPU did not give) is left out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from myolo.agent.metrics.exporter import AgentMetrics
from myolo.agent.metrics.plan import Planned, series
from myolo.common.metrics.mapping import Mapping, load
from myolo.common.telemetry_settings import TelemetrySettings

FIXED_GPU_ATTRIBUTES = {"hw.vendor": "NVIDIA"}


def register(metrics: AgentMetrics, meter: Meter, mapping: Mapping | None = None) -> list[str]:
    """Create the instruments; returns their names. Call once per meter."""
    mapping = mapping or load()
    groups: dict[str, list[Planned]] = {}
    for p in metrics.plan:
        groups.setdefault(p.spec.otel.name, []).append(p)
    for name, planned in groups.items():
        first = planned[0].spec
        callback = _callback(metrics, planned, mapping)
        if first.type == "counter":
            meter.create_observable_counter(name, [callback], unit=first.otel.unit, description=first.help)
        else:
            meter.create_observable_gauge(name, [callback], unit=first.otel.unit, description=first.help)
    return list(groups)


def _callback(
    metrics: AgentMetrics, planned: list[Planned], mapping: Mapping
) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def observe(_options: CallbackOptions) -> Iterable[Observation]:
        view = metrics.view()
        out = []
        for p in planned:
            fixed = dict(p.spec.otel.attributes)
            if p.spec.scope == "gpu":
                fixed.update(FIXED_GPU_ATTRIBUTES)
            for values, value in series(p, view):
                attrs = dict(fixed)
                for label, v in zip(p.labels, values, strict=True):
                    if v != "":
                        attr = mapping.attribute(p.spec, label) or label
                        attrs[attr] = mapping.attribute_value(attr, v)
                out.append(Observation(value * p.otel_scale, attrs))
        return out

    return observe


def start(metrics: AgentMetrics, settings: TelemetrySettings, instance: str) -> Callable[[], Awaitable[None]]:
    """A meter provider of the agent's own (not the process's global one) with ``settings``' exporter, and
    the instruments on it; returns its shutdown (a last export, then the reader's thread stops), run off the
    event loop since the export blocks on its HTTP request."""
    from opentelemetry.sdk.metrics import MeterProvider  # the SDK: only when telemetry is on

    from myolo.common.telemetry import metric_readers, resource

    provider = MeterProvider(resource=resource("myolo-agent", instance), metric_readers=metric_readers(settings))
    register(metrics, provider.get_meter("myolo.agent"))

    async def shutdown() -> None:
        await asyncio.to_thread(provider.shutdown, timeout_millis=5000)

    return shutdown
