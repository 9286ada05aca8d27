"""The fleet's series for ``GET /metrics``: nodes by liveness and health (every pair, zeros included, so a
series does not vanish when its last node leaves it)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, get_args

from myolo.coordinator.fleet.model import Liveness, NodeState
from myolo.events.payloads.common import Health


def series(nodes: Iterable[NodeState]) -> dict[str, list[tuple[tuple[str, ...], Any]]]:
    counts = Counter((n.liveness, n.health) for n in nodes)
    return {
        "myolo_nodes": [
            ((live, health), float(counts[(live, health)]))
            for live in get_args(Liveness)
            for health in get_args(Health)
        ]
    }
