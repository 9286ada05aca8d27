"""Helpers shared by the benchmarks: where results go and how they are written."""

from __future__ import annotations

import json
import math
import os
import platform
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def write_result(name: str, result: dict[str, Any]) -> Path:
    """Write ``results/<name>.json`` and print it, so a run leaves both a file and a log."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    doc = {"benchmark": name, "machine": machine(), **result}
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))
    return path


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    return s[min(len(s) - 1, int(q / 100 * len(s)))]


def wilson(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a rate (95 % by default); (0, 1) when there are no trials."""
    if trials <= 0:
        return 0.0, 1.0
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def spread(values: list[float], digits: int = 3) -> dict[str, float | int]:
    """Median and range of repeated measurements of one figure: how stable it is within a run."""
    s = sorted(values)
    if not s:
        return {"n": 0}
    mid = len(s) // 2
    median = s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
    return {"n": len(s), "median": round(median, digits), "min": round(s[0], digits), "max": round(s[-1], digits)}
