"""The metric-name mapping (``mapping.toml``, shipped in the package): each exported metric's Prometheus name,
unit and help, where its value comes from, and its OpenTelemetry name, unit and attributes.

Loaded once and validated as a whole: a unit that does not convert, a label with no attribute, two metrics that
would be one OpenTelemetry series, one OpenTelemetry name with two units or kinds. Both exporters and the PromQL
translator read this one object.
"""

from __future__ import annotations

import functools
import tomllib
from importlib import resources
from typing import Literal

import msgspec

from myolo.common.metrics import units

MetricType = Literal["gauge", "counter", "histogram"]
Scope = Literal["gpu", "node", "coordinator"]
Component = Literal["agent", "coordinator"]


class OtelName(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    unit: str
    attributes: dict[str, str] = {}


class MetricSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One ``[[metric]]`` of the mapping file."""

    name: str
    type: MetricType
    unit: str
    help: str
    source: str
    otel: OtelName
    dcgm: Literal["default", "optional"] | None = None
    # labels the source adds; "label" takes its attribute from [labels], "label=attribute" names its own
    by: list[str] = []
    scope: Scope = "gpu"
    component: Component = "agent"
    buckets: list[float] = []  # a histogram's upper bounds, increasing (+Inf is added)

    @property
    def by_labels(self) -> list[str]:
        return [b.split("=", 1)[0] for b in self.by]

    @property
    def by_attributes(self) -> dict[str, str]:
        """The attributes this metric names for its own labels (``by = ["phase=myolo.job.phase"]``)."""
        return dict(b.split("=", 1) for b in self.by if "=" in b)  # type: ignore[misc]

    @property
    def otel_scale(self) -> float:
        """What the scraped value is multiplied by to be in the OpenTelemetry unit."""
        return units.scale(self.unit, self.otel.unit)

    @property
    def otel_prometheus_name(self) -> str:
        """The OpenTelemetry metric's name as Prometheus stores it."""
        return units.prometheus_name(self.otel.name, self.otel.unit, self.type)


class Mapping(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    labels: dict[str, str]
    values: dict[str, dict[str, str]] = {}
    scopes: dict[Scope, list[str]]
    metric: list[MetricSpec]

    def by_name(self) -> dict[str, MetricSpec]:
        return {m.name: m for m in self.metric}

    def for_component(self, component: Component) -> list[MetricSpec]:
        return [m for m in self.metric if m.component == component]

    def labels_of(self, spec: MetricSpec) -> list[str]:
        """Every label of the metric's series, in order: the scope's identity, then the source's own."""
        return [*self.scopes[spec.scope], *spec.by_labels]

    def attribute(self, spec: MetricSpec, label: str) -> str | None:
        """The OpenTelemetry attribute of ``label`` on ``spec``'s series (None: not one of its labels' names)."""
        return spec.by_attributes.get(label) or self.labels.get(label)

    def attribute_value(self, attribute: str, value: str) -> str:
        """The OpenTelemetry value of ``attribute`` for the label value ``value`` (most are the same)."""
        return self.values.get(attribute, {}).get(value, value)


class MappingError(ValueError):
    """The mapping file is not usable; the message names the metric and the field."""


def parse(text: str, origin: str = "mapping.toml") -> Mapping:
    """Parse and validate a mapping; raises :class:`MappingError` naming the metric and the problem."""
    try:
        raw = tomllib.loads(text)
        mapping = msgspec.convert(raw, Mapping)
    except (tomllib.TOMLDecodeError, msgspec.ValidationError) as exc:
        raise MappingError(f"{origin}: {exc}") from None
    problems = validate(mapping)
    if problems:
        raise MappingError(f"{origin}: " + "; ".join(problems))
    return mapping


def validate(mapping: Mapping) -> list[str]:
    """Every problem of the mapping as a whole, one line each (empty: usable)."""
    problems: list[str] = []
    seen: dict[str, str] = {}
    kinds: dict[str, tuple[str, str, str]] = {}
    series: dict[tuple[str, tuple[tuple[str, str], ...], tuple[str, ...]], str] = {}
    for scope, labels in mapping.scopes.items():
        problems += [
            f"scopes.{scope}: label {lb!r} has no entry in [labels]" for lb in labels if lb not in mapping.labels
        ]
    for m in mapping.metric:
        where = f"metric {m.name!r}"
        if m.name in seen:
            problems.append(f"{where}: defined twice")
        seen[m.name] = m.name
        if m.scope not in mapping.scopes:
            problems.append(f"{where}: scope {m.scope!r} is not in [scopes]")
        problems += [
            f"{where}: label {lb!r} in by has no entry in [labels]; add one or write it as {lb}=<attribute>"
            for lb in m.by
            if lb not in mapping.labels and "=" not in lb
        ]
        if m.type == "histogram" and (not m.buckets or m.buckets != sorted(set(m.buckets))):
            problems.append(f"{where}: a histogram needs buckets, increasing")
        if m.buckets and m.type != "histogram":
            problems.append(f"{where}: buckets are for a histogram, not a {m.type}")
        for field, code in (("unit", m.unit), ("otel.unit", m.otel.unit)):
            try:
                units.unit(code)
            except ValueError as exc:
                problems.append(f"{where}: {field}: {exc}")
        try:
            units.scale(m.unit, m.otel.unit)
        except ValueError as exc:
            problems.append(f"{where}: unit and otel.unit: {exc}")
        kind = (m.otel.unit, m.type, m.name)
        first = kinds.setdefault(m.otel.name, kind)
        if first[:2] != kind[:2]:
            problems.append(
                f"{where}: otel name {m.otel.name!r} is {kind[1]} in {kind[0]!r} here but {first[1]} in "
                f"{first[0]!r} for {first[2]!r}; one OpenTelemetry metric has one unit and one kind"
            )
        by_attrs = tuple(sorted(mapping.attribute(m, lb) or lb for lb in m.by_labels))
        key = (m.otel.name, tuple(sorted(m.otel.attributes.items())), by_attrs)
        other = series.setdefault(key, m.name)
        if other != m.name:
            problems.append(f"{where}: same OpenTelemetry name and attributes as {other!r}; give otel.attributes apart")
    return problems


@functools.cache
def load() -> Mapping:
    """The mapping shipped with the package (parsed once per process)."""
    text = resources.files("myolo.common.metrics").joinpath("mapping.toml").read_text(encoding="utf-8")
    return parse(text)
