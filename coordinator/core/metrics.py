"""``GET /metrics`` of a coordinator: the core's series and each component's (its ``metrics()`` hook), rendered
under the names of ``common/metrics/mapping.toml``, every series labelled with this member's id.

A component names the metrics it serves by their mapping names and yields, for each, ``(values of the
metric's by-labels, value)``; the core owns no component's numbers. A name the mapping does not have, or a
series with the wrong number of labels, is dropped and logged once: a component's bug costs its own series,
never the page.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import structlog

from myolo.common.metrics.mapping import MetricSpec, load
from myolo.common.metrics.text import HistogramValue, render_family

log = structlog.get_logger("myolo.coordinator.metrics")

Series = tuple[tuple[str, ...], "float | HistogramValue"]
Provider = Callable[[], Mapping[str, Iterable[Series]]]


class CoordinatorMetrics:
    """``providers``: (who, the callable that returns its series by metric name), the core's first."""

    def __init__(self, member: str, providers: list[tuple[str, Provider]]) -> None:
        mapping = load()
        self.member = member
        self.providers = providers
        self.specs: dict[str, MetricSpec] = {m.name: m for m in mapping.for_component("coordinator")}
        self.labels = {name: tuple(mapping.labels_of(spec)) for name, spec in self.specs.items()}
        self._warned: set[tuple[str, str]] = set()

    def gather(self) -> dict[str, list[Series]]:
        out: dict[str, list[Series]] = {}
        for who, provide in self.providers:
            try:
                got = provide()
                for name, series in got.items():
                    spec = self.specs.get(name)
                    if spec is None:
                        self._warn(who, name, "is not a coordinator metric of the mapping file")
                        continue
                    want = len(spec.by_labels)
                    for values, value in series:
                        if len(values) != want:
                            self._warn(who, name, f"gave {len(values)} label values, not {want}")
                            continue
                        out.setdefault(name, []).append((values, value))
            except Exception:  # a component's bug loses its own series, not the page
                if (who, "") not in self._warned:
                    self._warned.add((who, ""))
                    log.exception("metrics provider failed", component=who)
        return out

    def render(self) -> str:
        gathered = self.gather()
        lines: list[str] = []
        for name, spec in self.specs.items():
            rows = (((self.member, *values), value) for values, value in gathered.get(name, ()))
            render_family(spec, self.labels[name], rows, lines)
        lines.append("")
        return "\n".join(lines)

    def _warn(self, who: str, name: str, what: str) -> None:
        if (who, name) not in self._warned:
            self._warned.add((who, name))
            log.error("metric dropped", component=who, metric=name, reason=what)
