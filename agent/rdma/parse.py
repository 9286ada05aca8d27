"""perftest's ``ib_write_lat`` report to numbers.

The report's table has a header line (``#bytes #iterations t_min[usec] t_max[usec] t_typical[usec]
t_avg[usec] t_stdev[usec] 99% percentile[usec] ...``) and one line of figures under it; the first seven
columns are read by position. Anything else is no result (None), never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass

COLUMNS = ("bytes", "iterations", "t_min", "t_max", "t_typical", "t_avg", "t_stdev")


@dataclass(frozen=True)
class Latency:
    size: int
    iterations: int
    t_min_us: float
    t_max_us: float
    t_typical_us: float
    t_avg_us: float


def parse_report(text: str) -> Latency | None:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "t_typical[usec]" not in line or not line.lstrip().startswith("#bytes"):
            continue
        for figures in lines[i + 1 :]:
            parts = figures.split()
            if not parts:
                continue
            try:
                v = [float(p) for p in parts[: len(COLUMNS)]]
            except ValueError:
                return None
            if len(v) < len(COLUMNS):
                return None
            return Latency(int(v[0]), int(v[1]), v[2], v[3], v[4], v[5])
    return None
