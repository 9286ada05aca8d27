"""A fixed-bucket histogram to observe into (a latency), read as one :class:`HistogramValue` series."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from myolo.common.metrics.text import HistogramValue


class Histogram:
    """Counts per bucket (``bounds`` as the mapping's ``buckets``); O(log buckets) an observation, no growth."""

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self._counts = [0] * (len(self.bounds) + 1)  # the last: over every bound
        self._sum = 0.0

    def observe(self, value: float) -> None:
        self._counts[bisect.bisect_left(self.bounds, value)] += 1
        self._sum += value

    def value(self) -> HistogramValue:
        cumulative, running = [], 0
        for n in self._counts[:-1]:
            running += n
            cumulative.append(running)
        return HistogramValue(tuple(cumulative), self._sum, running + self._counts[-1])
