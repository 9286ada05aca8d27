"""Which nodes each wave upgrades: cumulative shares of the nodes, at least one new node per wave, nodes
without running jobs first (so the first waves disturb no training), then by name."""

from __future__ import annotations

import math
from collections.abc import Iterable


def waves(nodes: Iterable[str], busy: set[str], percents: list[float]) -> list[tuple[float, list[str]]]:
    """``[(percent, nodes of that wave)]``; empty waves (more waves than nodes) are left out."""
    ordered = sorted(set(nodes), key=lambda n: (n in busy, n))
    total, done, out = len(ordered), 0, []
    for p in percents:
        if done >= total:
            break
        upto = min(total, max(done + 1, math.ceil(total * p / 100 - 1e-9)))
        out.append((p, ordered[done:upto]))
        done = upto
    return out
