"""Which nodes each wave upgrades: cumulative shares of the nodes, at least one new node per wave, nodes
without running jobs first (so the first waves disturb no training), then by name."""

from __future__ import annotations

import math
from collections.abc import Iterable
from collections.abc import Set as AbstractSet


def waves(nodes: Iterable[str], busy: AbstractSet[str], percents: list[float]) -> list[tuple[float, list[str]]]:
    """``[(share, nodes of that wave)]``: ``share`` is the percentage of ``nodes`` upgraded once the wave is
    done (with 3 nodes, waves planned at 5/20/50/100 % cover 33.3/66.7/100 %); empty waves (more waves than
    nodes) are left out."""
    ordered = sorted(set(nodes), key=lambda n: (n in busy, n))
    total, done, out = len(ordered), 0, []
    for p in percents:
        if done >= total:
            break
        upto = min(total, max(done + 1, math.ceil(total * p / 100 - 1e-9)))
        out.append((round(100 * upto / total, 1), ordered[done:upto]))
        done = upto
    return out
