"""Bounded rings of recent numbers the other components do not keep: per node its GPUs' samples over the last
hour (one every ``step_s``), per job its rank 0 progress points across generations.

A node's ring grows as samples come (a node heard once costs one slot, not an hour's) and then overwrites its
oldest slot; values are float32 (NaN: not reported). Full, at 2,000 nodes x 8 GPUs and 120 slots, the rings
hold about 17 KB per node, 33 MiB in all (measured in ``tests/benchmarks/bench_ui.py``, docs/dashboard.md).
"""

from __future__ import annotations

import math
from array import array
from collections import OrderedDict, deque

from myolo.events.payloads import GpuReading, NodeSample, TrainingProgress
from myolo.events.payloads.training import WorkerInfo

METRICS = ("util", "mem", "temp", "power")  # per GPU per slot, in this order
NAN = float("nan")


def readings(gpu: GpuReading) -> tuple[float, float, float, float]:
    """Utilisation (%), memory used (% of total), temperature (C), power (W) of one reading; NaN: unknown."""
    mem = gpu.mem_used_pct
    return (
        NAN if gpu.util_gpu is None else float(gpu.util_gpu),
        NAN if mem is None else mem,
        NAN if gpu.temp_gpu_c is None else float(gpu.temp_gpu_c),
        NAN if gpu.power_w is None else float(gpu.power_w),
    )


class NodeRing:
    """One node's slots: ``times[i]`` and ``values[i * width : (i + 1) * width]`` (GPU-major, METRICS inner)."""

    __slots__ = ("capacity", "gpus", "head", "times", "values", "workers")

    def __init__(self, gpus: int, capacity: int) -> None:
        self.capacity = capacity
        self.gpus = gpus
        self.head = 0  # the oldest slot once full
        self.times = array("d")
        self.values = array("f")
        self.workers: tuple[WorkerInfo, ...] = ()

    @property
    def width(self) -> int:
        return self.gpus * len(METRICS)

    def add(self, when: float, row: list[float]) -> None:
        if len(self.times) < self.capacity:
            self.times.append(when)
            self.values.extend(row)
            return
        i = self.head
        self.times[i] = when
        self.values[i * self.width : (i + 1) * self.width] = array("f", row)
        self.head = (i + 1) % self.capacity

    def ordered(self) -> list[int]:
        """Slot indexes, oldest first."""
        n = len(self.times)
        return [(self.head + k) % n for k in range(n)] if n else []

    def series(self, gpu: int, metric: int) -> list[float | None]:
        w, m = self.width, len(METRICS)
        out: list[float | None] = []
        for i in self.ordered():
            v = self.values[i * w + gpu * m + metric]
            out.append(None if math.isnan(v) else round(v, 2))
        return out

    def last_time(self) -> float | None:
        if not self.times:
            return None
        return self.times[(self.head - 1) % len(self.times)]


class NodeRings:
    """Every node's ring, for at most ``max_nodes`` nodes (a node beyond is not kept)."""

    def __init__(self, history_s: float, step_s: float, max_nodes: int) -> None:
        self.step_s = step_s
        self.capacity = max(1, int(history_s // step_s))
        self.max_nodes = max_nodes
        self.rings: dict[str, NodeRing] = {}

    def add(self, sample: NodeSample, now: float) -> bool:
        """Keep the sample when its node's last slot is ``step_s`` old; True when a slot was written."""
        ring = self.rings.get(sample.node_id)
        if ring is None:
            if len(self.rings) >= self.max_nodes:
                return False
            ring = self.rings[sample.node_id] = NodeRing(len(sample.gpus), self.capacity)
        if sample.workers is not None:
            ring.workers = tuple(sample.workers)
        if len(sample.gpus) != ring.gpus:  # a node whose GPU count changed starts over
            ring = self.rings[sample.node_id] = NodeRing(len(sample.gpus), self.capacity)
        last = ring.last_time()
        if last is not None and now - last < self.step_s:
            return False
        row: list[float] = []
        for gpu in sorted(sample.gpus, key=lambda g: g.index):
            row.extend(readings(gpu))
        ring.add(now, row)
        return True

    def forget(self, node_id: str) -> None:
        self.rings.pop(node_id, None)


class JobRings:
    """Per job, its rank 0 progress points ``(time, generation, step, loss, tokens/s)``, at most ``points``
    each and ``max_jobs`` jobs (the job heard of longest ago goes first)."""

    def __init__(self, points: int, max_jobs: int) -> None:
        self.points = points
        self.max_jobs = max_jobs
        self.jobs: OrderedDict[str, deque[tuple[float, int, int, float, float]]] = OrderedDict()

    def add(self, p: TrainingProgress, now: float) -> bool:
        if p.rank != 0:
            return False
        ring = self.jobs.get(p.job_id)
        if ring is None:
            while len(self.jobs) >= self.max_jobs:
                self.jobs.popitem(last=False)
            ring = self.jobs[p.job_id] = deque(maxlen=self.points)
        else:
            self.jobs.move_to_end(p.job_id)
        ring.append((now, p.generation, p.step, p.loss, p.tokens_per_s))
        return True
