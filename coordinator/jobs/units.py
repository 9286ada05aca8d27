"""Quantities as operators write them in manifests: durations (``300s``, ``5m``, ``1h30m``, ``90``) and
thresholds (``75%`` or a plain number). Errors say what was given and what is accepted."""

from __future__ import annotations

import re

_DURATION = re.compile(
    r"^(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m(?!s))?(?:(?P<s>\d+(?:\.\d+)?)s)?(?:(?P<ms>\d+(?:\.\d+)?)ms)?$"
)
MAX_SECONDS = 30 * 86_400.0


def duration_s(value: object) -> float:
    """Seconds from ``300s``, ``5m``, ``1h30m``, ``250ms`` or a number of seconds; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration like 300s, 5m or 1h, got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and value.strip() and (m := _DURATION.match(value.strip())):
        parts = {k: float(v) for k, v in m.groupdict().items() if v is not None}
        seconds = parts.get("h", 0) * 3600 + parts.get("m", 0) * 60 + parts.get("s", 0) + parts.get("ms", 0) / 1000
    else:
        raise ValueError(f"expected a duration like 300s, 5m or 1h, got {value!r}")
    if not 0 <= seconds <= MAX_SECONDS:
        raise ValueError(f"{value!r} is out of range: a duration from 0 to 30 days")
    return seconds


def threshold(value: object) -> tuple[float, bool]:
    """(number, is_percent) from ``75%`` or ``10``; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number or a percentage like 75%, got {value!r}")
    if isinstance(value, int | float):
        return float(value), False
    if isinstance(value, str):
        text = value.strip()
        try:
            if text.endswith("%"):
                pct = float(text[:-1])
                if not 0 <= pct <= 100:
                    raise ValueError(f"{value!r}: a percentage must be between 0% and 100%")
                return pct, True
            return float(text), False
        except ValueError as exc:
            if "percentage must" in str(exc):
                raise
    raise ValueError(f"expected a number or a percentage like 75%, got {value!r}")
