"""The Prometheus text exposition format (0.0.4), written by hand for one reason: dcgm-exporter exposes its
counters without the ``_total`` suffix (``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``), and prometheus_client's
renderer adds it to every counter, which would rename the series every dashboard and alert queries.

A family is rendered from a spec of the mapping and the series its source produced.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from events.metrics.mapping import MetricSpec

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
Series = tuple[Sequence[str], float]  # label values, in the order of the family's labels; the value


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
    lines = []
    for values, value in series:
        pairs = ",".join(f'{k}="{escape_label(v)}"' for k, v in zip(labels, values, strict=True))
        lines.append(f"{spec.name}{{{pairs}}} {format_value(value)}" if pairs else f"{spec.name} {format_value(value)}")
    if lines:
        out.append(f"# HELP {spec.name} {escape_help(spec.help)}")
        out.append(f"# TYPE {spec.name} {spec.type}")
        out.extend(lines)
