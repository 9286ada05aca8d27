"""The measured metrics of one job generation, as windowed means for the scaling policies.

Every time is the coordinator clock's ``now`` when the reading arrived (never wall time, never the
sender's), so windows are comparable across nodes whose clocks disagree.

How the job-level value of each metric is formed over a window (each replica or node is first averaged
over the window on its own, so one that reports more often does not weigh more):

- ``step_time``: the mean over data-parallel replicas of their mean step time.
- ``tokens_per_s``: the mean over replicas, NOT the sum. Each replica's reporter sends
  global batch x sequence length / its step time (``kernels/train/loop.py``), which is already the whole
  job's rate seen from that replica; the job's rate is the sum of the replicas' own rows per second,
  sum_r (batch x seq / R) / t_r, which is exactly the mean of what they report. A sum would count it R times.
- ``gradient_staleness``: the maximum over replicas: the most stale replica is the one whose updates hurt.
- ``gpu_util``: the mean over the job's nodes of each node's mean utilisation (percent, 0..100) of the
  job's GPUs there; a node's GPUs that report no utilisation are left out, never read as 0.

A fresh generation must not be judged on one sample: a replica's (or node's) window counts only when its
readings span at least half the window (two readings at least). A new generation starts from
:meth:`JobMetrics.reset`.

Memory is bounded whatever arrives: readings are folded into buckets of ``resolution_s`` and buckets older
than ``horizon_s`` (the longest window a policy may use) are dropped, so a series holds at most
``horizon_s / resolution_s + 2`` buckets, with no reading of the horizon lost to that bound; the number of
replicas and nodes tracked is capped at ``max_keys`` (readings of any other are refused and counted).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from myolo.coordinator.jobs.manifest import Metric
from myolo.events.payloads import NodeSample, TrainingProgress

HORIZON_S = 3600.0
RESOLUTION_S = 1.0
MAX_KEYS = 4096  # the manifest's largest maxReplicas
METRICS: tuple[Metric, ...] = ("step_time", "tokens_per_s", "gradient_staleness", "gpu_util")


@dataclass(slots=True)
class _Bucket:
    first: float
    last: float
    total: float
    count: int


@dataclass(frozen=True, slots=True)
class WindowMean:
    """One series over one window: the mean, how many readings, and how much of the window they span."""

    mean: float
    samples: int
    span_s: float


def _check_bounds(horizon_s: float, resolution_s: float) -> None:
    if not 0 < resolution_s <= horizon_s:
        raise ValueError(f"resolution_s ({resolution_s}) must be > 0 and at most horizon_s ({horizon_s})")


class Series:
    """Readings of one quantity (one replica's step time, one node's utilisation) in time buckets.

    A reading within ``resolution_s`` of the newest bucket's first reading joins that bucket, so bucket
    starts are at least ``resolution_s`` apart and the horizon never holds more than the deque's length.
    A reading older than the newest one (out of order) is taken as arriving with it."""

    def __init__(self, horizon_s: float = HORIZON_S, resolution_s: float = RESOLUTION_S) -> None:
        _check_bounds(horizon_s, resolution_s)
        self.horizon_s = horizon_s
        self.resolution_s = resolution_s
        self.buckets: deque[_Bucket] = deque(maxlen=math.ceil(horizon_s / resolution_s) + 2)

    def __len__(self) -> int:
        return len(self.buckets)

    def add(self, t: float, value: float) -> None:
        b = self.buckets
        if b and t < b[-1].last:
            t = b[-1].last
        if b and t - b[-1].first < self.resolution_s:
            newest = b[-1]
            newest.last, newest.total, newest.count = t, newest.total + value, newest.count + 1
        else:
            b.append(_Bucket(t, t, value, 1))
        while b[0].last < t - self.horizon_s:
            b.popleft()

    def window(self, window_s: float, now: float) -> WindowMean | None:
        """The readings from ``now - window_s`` to ``now`` (to within ``resolution_s`` at the start)."""
        start = now - window_s
        total, count, first, last = 0.0, 0, math.inf, -math.inf
        for bucket in reversed(self.buckets):
            if bucket.last < start:
                break
            if bucket.first > now:
                continue
            total, count = total + bucket.total, count + bucket.count
            first, last = min(first, bucket.first), max(last, bucket.last)
        if count == 0:
            return None
        return WindowMean(mean=total / count, samples=count, span_s=min(last, now) - max(first, start))


class JobMetrics:
    """The time series of ONE job generation: feed progress and node samples, ask for windowed means.

    ``generation`` (when given) fences progress from workers of another generation (left over from before
    a resize); ``replicas`` (when given) refuses a ``dp_rank`` the generation does not have."""

    def __init__(
        self,
        generation: int | None = None,
        replicas: int | None = None,
        *,
        horizon_s: float = HORIZON_S,
        resolution_s: float = RESOLUTION_S,
        max_keys: int = MAX_KEYS,
    ) -> None:
        _check_bounds(horizon_s, resolution_s)
        self.horizon_s, self.resolution_s, self.max_keys = horizon_s, resolution_s, max_keys
        self.refused = 0  # readings refused (another generation, a rank or node over the bounds), ever
        self.reset(generation, replicas)

    def reset(self, generation: int | None = None, replicas: int | None = None) -> None:
        """Forget every reading: a new generation has new replicas on new nodes."""
        self.generation, self.replicas = generation, replicas
        self._series: dict[Metric, dict[int | str, Series]] = {m: {} for m in METRICS}
        self._nodes: dict[int, str] = {}

    # ---- input ----------------------------------------------------------------------------------------

    def add_progress(self, p: TrainingProgress, now: float) -> bool:
        """One replica's step; False (and counted in ``refused``) when it is not this generation's."""
        key = p.dp_rank
        fenced = self.generation is not None and p.generation != self.generation
        if fenced or (self.replicas is not None and key >= self.replicas) or not self._room_for("step_time", key):
            self.refused += 1
            return False
        self._series_for("step_time", key).add(now, p.step_time_s)
        self._series_for("tokens_per_s", key).add(now, p.tokens_per_s)
        self._series_for("gradient_staleness", key).add(now, float(p.gradient_staleness))
        if p.node_id is not None:
            self._nodes[key] = p.node_id
        return True

    def add_gpu_util(self, node_id: str, gpus: Sequence[int], sample: NodeSample, now: float) -> bool:
        """The mean utilisation of the job's ``gpus`` on ``node_id`` from its sample; False when none of them
        reports utilisation (a reading the hardware does not support is absent, not 0)."""
        if sample.node_id != node_id:
            raise ValueError(f"node_id: the sample is from {sample.node_id!r}, not {node_id!r}")
        wanted = set(gpus)
        utils = [g.util_gpu for g in sample.gpus if g.index in wanted and g.util_gpu is not None]
        if not utils:
            return False
        if not self._room_for("gpu_util", node_id):
            self.refused += 1
            return False
        self._series_for("gpu_util", node_id).add(now, sum(utils) / len(utils))
        return True

    # ---- output ---------------------------------------------------------------------------------------

    def mean(self, metric: Metric, window_s: float, now: float) -> float | None:
        """The job's ``metric`` over the window ending at ``now``; None while no replica (or node) has
        readings spanning half the window. A window of 0 s or less never holds enough."""
        values = list(self.means_by_key(metric, window_s, now).values())
        if not values:
            return None
        return max(values) if metric == "gradient_staleness" else sum(values) / len(values)

    def means_by_key(self, metric: Metric, window_s: float, now: float) -> dict[int | str, float]:
        """Each replica's (by dp_rank) or, for ``gpu_util``, each node's mean over the window, for those
        whose readings span at least half of it."""
        out: dict[int | str, float] = {}
        if window_s <= 0:
            return out
        for key, series in self._series[metric].items():
            w = series.window(window_s, now)
            if w is not None and w.samples >= 2 and w.span_s >= window_s / 2:
                out[key] = w.mean
        return out

    def replica_step_times(self, window_s: float, now: float) -> dict[int, float]:
        """Each replica's mean step time over the window, by dp_rank (for the straggler check)."""
        return {int(k): v for k, v in self.means_by_key("step_time", window_s, now).items()}

    def node_of(self, dp_rank: int) -> str | None:
        """The node a replica's progress last came from, when its progress names one."""
        return self._nodes.get(dp_rank)

    def keys(self, metric: Metric) -> int:
        """How many replicas (or nodes, for ``gpu_util``) have readings of ``metric``."""
        return len(self._series[metric])

    def sizes(self) -> dict[str, int]:
        """Buckets held per metric over all replicas or nodes: what the memory bound is about."""
        return {m: sum(len(s) for s in by_key.values()) for m, by_key in self._series.items()}

    def _room_for(self, metric: Metric, key: int | str) -> bool:
        by_key = self._series[metric]
        return key in by_key or len(by_key) < self.max_keys

    def _series_for(self, metric: Metric, key: int | str) -> Series:
        by_key = self._series[metric]
        series = by_key.get(key)
        if series is None:
            series = by_key[key] = Series(self.horizon_s, self.resolution_s)
        return series
