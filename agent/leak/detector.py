"""The node's leak watch: one :class:`LeakSeries` per GPU, per process on a GPU, and per trainer's RSS.

Fed from what the agent already reads (each ``NodeSample``; RSS from ``myolo.agent.leak.rss``), it publishes a
``LeakReport`` per series every ``report_interval_s`` and at once when a series' alert starts or ends, plus a
``NodeFault`` (kind ``leak``, health ``warn``) when one starts. Time is the ``now`` passed in, taken from
the agent's clock, so simulated days replay in seconds.

A GPU's series starts over when a new process appears on it (a new trainer fills memory: warm-up, not a
leak); a process's series ends when the process is gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from myolo.agent.leak.config import LeakConfig
from myolo.agent.leak.series import LeakEstimate, LeakSeries
from myolo.events.payloads import LeakReport, NodeFault, NodeSample

Subject = Literal["gpu", "process_gpu", "host_rss"]
Key = tuple[Subject, int | None, int | None]  # subject, gpu index, pid


@dataclass(slots=True)
class _Tracked:
    series: LeakSeries
    last_report: float | None = None
    pids: frozenset[int] = field(default_factory=frozenset)


class LeakDetector:
    def __init__(self, node_id: str, config: LeakConfig | None = None) -> None:
        self.node_id = node_id
        self.config = config or LeakConfig()
        self._series: dict[Key, _Tracked] = {}

    @property
    def tracked(self) -> list[Key]:
        return sorted(self._series, key=str)

    def _feed(self, key: Key, capacity: float, value: float, now: float) -> list[LeakReport | NodeFault]:
        tracked = self._series.get(key)
        if tracked is None or tracked.series.capacity != capacity:
            tracked = self._series[key] = _Tracked(LeakSeries(capacity, self.config))
        verdict = tracked.series.add(now, value)
        if verdict is None:
            return []
        due = tracked.last_report is None or now - tracked.last_report >= self.config.report_interval_s
        if not (due or verdict.changed):
            return []
        tracked.last_report = now
        out: list[LeakReport | NodeFault] = [self._report(key, verdict)]
        if verdict.changed and verdict.alert:
            out.append(self._fault(key, verdict))
        return out

    def observe(self, sample: NodeSample, now: float) -> list[LeakReport | NodeFault]:
        """Take one node sample: GPU used memory and per-process GPU memory."""
        out: list[LeakReport | NodeFault] = []
        seen: set[Key] = set()
        for gpu in sample.gpus:
            total = gpu.mem_total_bytes
            if not total:
                continue
            pids = frozenset(p.pid for p in gpu.processes or [])
            key: Key = ("gpu", gpu.index, None)
            if gpu.mem_used_bytes is not None:
                tracked = self._series.get(key)
                if tracked is not None and pids - tracked.pids:
                    tracked.series.reset()  # a new trainer arrived on this GPU: its fill-up is warm-up
                out.extend(self._feed(key, total, gpu.mem_used_bytes, now))
                self._series[key].pids = pids
                seen.add(key)
            for proc in gpu.processes or []:
                if proc.used_bytes is None:
                    continue
                pkey: Key = ("process_gpu", gpu.index, proc.pid)
                out.extend(self._feed(pkey, total, proc.used_bytes, now))
                seen.add(pkey)
        for gone in [k for k in self._series if k[0] != "host_rss" and k not in seen]:
            del self._series[gone]
        return out

    def observe_rss(self, rss: dict[int, int], host_total_bytes: int, now: float) -> list[LeakReport | NodeFault]:
        """Take the resident memory of the trainer processes (pid -> bytes), as % of the host's memory."""
        if host_total_bytes <= 0:
            raise ValueError(f"host_total_bytes must be > 0, got {host_total_bytes}")
        out: list[LeakReport | NodeFault] = []
        for pid, value in rss.items():
            out.extend(self._feed(("host_rss", None, pid), host_total_bytes, value, now))
        for gone in [k for k in self._series if k[0] == "host_rss" and k[2] not in rss]:
            del self._series[gone]
        return out

    def _report(self, key: Key, v: LeakEstimate) -> LeakReport:
        subject, gpu, pid = key
        return LeakReport(
            node_id=self.node_id,
            subject=subject,
            gpu_index=gpu,
            pid=pid,
            slope_pct_per_h=v.slope,
            lower_pct_per_h=v.lower,
            upper_pct_per_h=v.upper,
            confidence=self.config.confidence,
            window_s=v.window_s,
            samples=v.samples,
            threshold_pct_per_h=self.config.threshold_pct_per_h,
            alert=v.alert,
            method="theil-sen floor",
        )

    def _fault(self, key: Key, v: LeakEstimate) -> NodeFault:
        subject, gpu, pid = key
        what = {"gpu": f"GPU {gpu} used memory", "process_gpu": f"pid {pid} on GPU {gpu}", "host_rss": f"pid {pid} RSS"}
        return NodeFault(
            node_id=self.node_id,
            kind="leak",
            health="warn",
            reasons=[
                f"{what[subject]} grows {v.slope:.3f} %/h (>= {v.lower:.3f} %/h at {self.config.confidence:.0%}), "
                f"threshold {self.config.threshold_pct_per_h} %/h"
            ],
            gpu_index=gpu,
            message=f"memory leak suspected: {what[subject]}",
        )
