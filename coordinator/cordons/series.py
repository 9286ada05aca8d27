"""The cordons' series for ``GET /metrics``: cordoned nodes by author, and the time from a node's fault to
its automatic cordon being written (a histogram, on the leader that wrote it)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from myolo.common.metrics.histogram import Histogram
from myolo.coordinator.cordons.policy import AUTO_FAULT, AUTO_LOST
from myolo.coordinator.cordons.writer import LATENCY_METRIC
from myolo.coordinator.fleet.interface import NodeState


def series(nodes: Iterable[NodeState], latency: Histogram) -> dict[str, list[tuple[tuple[str, ...], Any]]]:
    authors = Counter(dict.fromkeys((AUTO_FAULT, AUTO_LOST), 0))  # the usual ones, at 0 when none
    authors.update(n.cordon.by for n in nodes if n.cordoned and n.cordon is not None)
    return {
        "myolo_cordons": [((by,), float(n)) for by, n in sorted(authors.items())],
        LATENCY_METRIC: [((), latency.value())],
    }
