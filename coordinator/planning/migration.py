"""The migration planner's arithmetic, apart from the command line so each figure is checked exactly.

Bandwidth: ``Mbps = GB x 8000 / (hours x 3600)``. The usual rule of thumb ``GB x 8 / hours / 3600`` is labelled Mbps,
which is 1000 times too small: ``GB x 8`` is gigabits, so its result is in Gbps. Metadata memory: the
rule of thumb for the storage layer's (JuiceFS) metadata engine, ``GB = files x 1 KB / 1,000,000``.

Sizes take decimal units (``TB`` = 10^12 bytes) and binary ones (``TiB`` = 2^40 bytes); a size is always in
bytes (a trailing ``B``: ``Tb`` would be terabits and is refused). Rates are decimal bits per second, as
links are sold (``10Gbps`` = 10^10 bit/s).
"""

from __future__ import annotations

import math
import re
from typing import Literal

import msgspec

DECIMAL = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50, "E": 2**60}
SEED_BYTES_PER_FILE = 1000  # the rule of thumb's "1 KB" of metadata-engine memory per file
MAX_SECONDS = 10 * 365 * 86_400.0

_NUMBER = r"(?P<n>\d+(?:[,_]\d{3})*(?:\.\d+)?(?:[eE][+-]?\d+)?)"  # 1,000 and 1_000 group thousands
_SIZE = re.compile(rf"^{_NUMBER}\s*(?P<prefix>[kKmMgGtTpPeE]?)(?P<i>[iI]?)(?P<unit>[bB]?)$")
_RATE = re.compile(rf"^{_NUMBER}\s*(?P<prefix>[kKmMgGtTpP]?)(?P<unit>bps|bit/s|b/s|B/s|Bps)$")
_DURATION = re.compile(
    r"^(?:(?P<d>\d+(?:\.\d+)?)d)?(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m)?(?:(?P<s>\d+(?:\.\d+)?)s)?$"
)
_COUNT = re.compile(r"^(?P<n>\d+(?:[,_]\d{3})*(?:\.\d+)?(?:[eE]\+?\d+)?)\s*(?P<suffix>[kKmMgGbB]?)$")
_COUNT_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "B": 10**9}


class PlanInputError(ValueError):
    """An input the planner cannot read; ``option`` is the flag to fix (``--size``)."""

    def __init__(self, option: str, reason: str) -> None:
        super().__init__(f"{option}: {reason}")
        self.option, self.reason = option, reason


class Size(msgspec.Struct, frozen=True, kw_only=True):
    """A volume as given and in bytes; ``units`` says which system the unit belongs to."""

    given: str
    bytes: int
    units: Literal["decimal", "binary"]


class LinkPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What a given link would take: ``effective_bps`` is its rate times the efficiency."""

    given: str
    bps: float
    effective_bps: float
    seconds: float
    hours: float
    meets_deadline: bool | None = None  # None when no deadline was given


class BandwidthPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Bandwidth to move ``size`` in ``seconds``; ``provision_*`` divides by the efficiency (what link to buy)."""

    size: Size
    seconds: float | None
    hours: float | None
    mbps: float | None  # payload rate, decimal megabits per second
    gbps: float | None
    efficiency: float
    provision_mbps: float | None
    provision_gbps: float | None
    seed_formula_value: float | None  # what the usual formula prints (labelled Mbps; it is Gbps)
    link: LinkPlan | None = None
    formula: str = "Mbps = GB x 8000 / (hours x 3600)"
    correction: str = (
        "the usual `Mbps = GB x 8 / hours / 3600` is off by a factor of 1000: GB x 8 is gigabits, "
        "so it gives Gbps, not Mbps"
    )


class MetadataPlan(msgspec.Struct, frozen=True, kw_only=True):
    files: int
    bytes_per_file: Size
    bytes: int
    gb: float  # decimal gigabytes, as the rule states it
    gib: float
    rule: str = "GB = files x 1 KB / 1,000,000 (the usual rule of thumb for the metadata engine, not a measurement)"


def _number(text: str, option: str) -> float:
    value = float(text.replace(",", "").replace("_", ""))
    if not math.isfinite(value):
        raise PlanInputError(option, f"{text!r} is not a finite number")
    return value


def parse_size(text: str, option: str = "--size") -> Size:
    """``50TB``, ``500GiB``, ``1.5PB``, ``1KB``: bytes. A bare number, a bit unit or an unknown one is refused."""
    raw = text.strip()
    m = _SIZE.match(raw)
    example = "e.g. 50TB (decimal, 10^12 bytes) or 50TiB (binary, 2^40 bytes)"
    if m is None:
        raise PlanInputError(option, f"{text!r} is not a size; {example}")
    prefix, binary, unit = m["prefix"].upper(), bool(m["i"]), m["unit"]
    if unit == "b":
        raise PlanInputError(option, f"{text!r} reads as bits (lowercase b); give bytes with B, {example}")
    if not unit or (binary and not prefix):
        raise PlanInputError(option, f"{text!r} has no unit; {example}")
    factor = BINARY[prefix] if binary else DECIMAL[prefix]
    value = _number(m["n"], option) * factor
    if value <= 0:
        raise PlanInputError(option, f"{text!r} must be more than 0 bytes")
    return Size(given=raw, bytes=round(value), units="binary" if binary else "decimal")


def parse_duration_s(text: str, option: str = "--hours") -> float:
    """Seconds from hours as a number (``24``, ``1.5``) or a duration (``24h``, ``90m``, ``2d``, ``1h30m``)."""
    raw = text.strip().lower()
    try:
        seconds = _number(raw, option) * 3600.0
    except ValueError:
        m = _DURATION.match(raw)
        if not raw or m is None:
            raise PlanInputError(
                option, f"{text!r} is not a time; give hours (24, 1.5) or a duration (24h, 90m, 2d, 1h30m)"
            ) from None
        parts = {k: float(v) for k, v in m.groupdict().items() if v is not None}
        seconds = parts.get("d", 0) * 86_400 + parts.get("h", 0) * 3600 + parts.get("m", 0) * 60 + parts.get("s", 0)
    if not 0 < seconds <= MAX_SECONDS:
        raise PlanInputError(option, f"{text!r} must be more than 0 and at most 10 years")
    return seconds


def parse_rate_bps(text: str, option: str = "--link") -> float:
    """Bits per second from ``10Gbps``, ``400Mbit/s``, ``10Gb/s`` (bits) or ``1.25GB/s`` (bytes, times 8)."""
    raw = text.strip()
    m = _RATE.match(raw)
    if m is None:
        raise PlanInputError(option, f"{text!r} is not a rate; e.g. 10Gbps, 400Mbps, 1Gbit/s (decimal bits per second)")
    bits_per_unit = 8 if m["unit"] in ("B/s", "Bps") else 1
    value = _number(m["n"], option) * DECIMAL[m["prefix"].upper()] * bits_per_unit
    if value <= 0:
        raise PlanInputError(option, f"{text!r} must be faster than 0 bit/s")
    return value


def parse_count(text: str, option: str = "--files") -> int:
    """A whole count: ``250000000``, ``250,000,000``, ``250M``, ``2.5e8``, ``1B`` (a billion)."""
    raw = text.strip()
    m = _COUNT.match(raw)
    if m is None:
        raise PlanInputError(option, f"{text!r} is not a count of files; e.g. 250000000, 250M or 2.5e8")
    value = _number(m["n"], option) * _COUNT_SUFFIX[m["suffix"].upper()]
    if value < 1 or value != int(value):
        raise PlanInputError(option, f"{text!r} must be a whole number of files, at least 1")
    return int(value)


def check_efficiency(value: float) -> float:
    if not 0 < value <= 1:
        raise PlanInputError(
            "--efficiency", f"{value!r} must be in (0, 1]: the share of the link the transfer gets, e.g. 0.8"
        )
    return value


def bandwidth(
    size: Size, seconds: float | None, efficiency: float = 1.0, link_bps: float | None = None, link_given: str = ""
) -> BandwidthPlan:
    """The rate that moves ``size`` in ``seconds`` (decimal Mbps and Gbps), and what ``link_bps`` takes."""
    check_efficiency(efficiency)
    bits = size.bytes * 8
    mbps = bits / seconds / 1e6 if seconds else None
    gb = size.bytes / 1e9
    link = None
    if link_bps is not None:
        effective = link_bps * efficiency
        took = bits / effective
        link = LinkPlan(
            given=link_given,
            bps=link_bps,
            effective_bps=effective,
            seconds=took,
            hours=took / 3600,
            meets_deadline=None if seconds is None else took <= seconds,
        )
    return BandwidthPlan(
        size=size,
        seconds=seconds,
        hours=seconds / 3600 if seconds else None,
        mbps=mbps,
        gbps=mbps / 1000 if mbps is not None else None,
        efficiency=efficiency,
        provision_mbps=mbps / efficiency if mbps is not None else None,
        provision_gbps=mbps / efficiency / 1000 if mbps is not None else None,
        seed_formula_value=gb * 8 / (seconds / 3600) / 3600 if seconds else None,
        link=link,
    )


def metadata_memory(files: int, bytes_per_file: Size) -> MetadataPlan:
    """The metadata engine's memory for ``files`` files at ``bytes_per_file`` each (the rule of thumb says 1 KB)."""
    if files < 1:
        raise PlanInputError("--files", f"{files} must be at least 1")
    total = files * bytes_per_file.bytes
    return MetadataPlan(files=files, bytes_per_file=bytes_per_file, bytes=total, gb=total / 1e9, gib=total / 2**30)
