"""Units of the metric mapping: UCUM-style codes as OpenTelemetry writes them, each with its dimension and its
factor to that dimension's base, so a value converts between any two units of one dimension.

Also the suffix OpenTelemetry's Prometheus exporters add for a unit (``By`` -> ``bytes``): what a metric
exported over OTLP is called once Prometheus stores it.
"""

from __future__ import annotations

from typing import NamedTuple


class Unit(NamedTuple):
    dimension: str
    factor: float  # to the dimension's base unit
    suffix: str  # what OpenTelemetry's Prometheus naming adds ("" for none)


UNITS: dict[str, Unit] = {
    "1": Unit("ratio", 1.0, ""),
    "%": Unit("ratio", 0.01, "percent"),
    "By": Unit("bytes", 1.0, "bytes"),
    "KiBy": Unit("bytes", 1024.0, "kibibytes"),
    "MiBy": Unit("bytes", 1024.0**2, "mebibytes"),
    "GiBy": Unit("bytes", 1024.0**3, "gibibytes"),
    "By/s": Unit("byte_rate", 1.0, "bytes_per_second"),
    "GBy/s": Unit("byte_rate", 1e9, "gigabytes_per_second"),
    "W": Unit("power", 1.0, "watts"),
    "J": Unit("energy", 1.0, "joules"),
    "mJ": Unit("energy", 1e-3, "millijoules"),
    "Cel": Unit("temperature", 1.0, "celsius"),
    "s": Unit("time", 1.0, "seconds"),
    "ms": Unit("time", 1e-3, "milliseconds"),
    "ns": Unit("time", 1e-9, "nanoseconds"),
    "Hz": Unit("frequency", 1.0, "hertz"),
    "MHz": Unit("frequency", 1e6, "megahertz"),
    "%/h": Unit("ratio_rate", 0.01 / 3600.0, "percent_per_hour"),
}


def unit(code: str) -> Unit:
    """The unit ``code`` names; a count written in braces (``{error}``) is a dimensionless count of that thing."""
    if code.startswith("{") and code.endswith("}") and len(code) > 2:
        return Unit("count", 1.0, "")
    try:
        return UNITS[code]
    except KeyError:
        known = ", ".join(sorted(UNITS))
        raise ValueError(f"unknown unit {code!r}: use one of {known}, or a count in braces such as {{error}}") from None


def scale(src: str, dst: str) -> float:
    """What a value in ``src`` is multiplied by to be in ``dst``; raises ``ValueError`` across dimensions."""
    a, b = unit(src), unit(dst)
    if a.dimension != b.dimension:
        raise ValueError(f"cannot convert {src!r} ({a.dimension}) to {dst!r} ({b.dimension})")
    return a.factor / b.factor


def prometheus_name(otel_name: str, otel_unit: str, kind: str) -> str:
    """The name Prometheus stores an OpenTelemetry metric under: dots to ``_``, the unit's suffix, ``_total``
    on counters (OpenTelemetry's Prometheus compatibility rules)."""
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in otel_name)
    suffix = unit(otel_unit).suffix
    if suffix and not name.endswith(f"_{suffix}"):
        name = f"{name}_{suffix}"
    if kind == "counter" and not name.endswith("_total"):
        name = f"{name}_total"
    return name


def prometheus_label(attribute: str) -> str:
    """The label an OpenTelemetry attribute becomes in Prometheus (``hw.id`` -> ``hw_id``)."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in attribute)
