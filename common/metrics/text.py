"""The Prometheus text exposition format (0.0.4), written by hand for one reason: dcgm-exporter exposes its
counters without the ``_total`` suffix (``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``), and prometheus_client's
renderer adds it to every counter, which would rename the series every dashboard and alert queries.

A family is rendered from a spec of the mapping and the series its source produced.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from myolo.common.metrics.mapping import MetricSpec

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class HistogramValue:
    """One histogram series: the count of observations at or under each bound of the spec's ``buckets``
    (cumulative, as the format has them), and the sum and count of all of them."""

    cumulative: tuple[int, ...]
    sum: float
    count: int


Series = tuple[Sequence[str], "float | HistogramValue"]  # label values in the family's order; the value


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """Integral values without a fraction (``81920``), the rest as Python's shortest repr; NaN and infinities
    as the format spells them."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def render_family(spec: MetricSpec, labels: Sequence[str], series: Iterable[Series], out: list[str]) -> None:
    """Append the family's HELP, TYPE and one line per series to ``out``; nothing for a family with no series
    (a field the hardware does not support is absent, as in dcgm-exporter)."""
    lines: list[str] = []
    for values, value in series:
        pairs = ",".join(f'{k}="{escape_label(v)}"' for k, v in zip(labels, values, strict=True))
        if isinstance(value, HistogramValue):
            _histogram(spec, pairs, value, lines)
        else:
            lines.append(_line(spec.name, pairs, value))
    if lines:
        out.append(f"# HELP {spec.name} {escape_help(spec.help)}")
        out.append(f"# TYPE {spec.name} {spec.type}")
        out.extend(lines)


def _line(name: str, pairs: str, value: float) -> str:
    return f"{name}{{{pairs}}} {format_value(value)}" if pairs else f"{name} {format_value(value)}"


def _histogram(spec: MetricSpec, pairs: str, h: HistogramValue, lines: list[str]) -> None:
    sep = "," if pairs else ""
    for bound, n in zip(spec.buckets, h.cumulative, strict=True):
        lines.append(f'{spec.name}_bucket{{{pairs}{sep}le="{format_value(bound)}"}} {n}')
    lines.append(f'{spec.name}_bucket{{{pairs}{sep}le="+Inf"}} {h.count}')
    lines.append(_line(f"{spec.name}_sum", pairs, h.sum))
    lines.append(_line(f"{spec.name}_count", pairs, h.count))
