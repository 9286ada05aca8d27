"""What every coordinator keeps for the rollouts' gates: FAIL faults, leak reports and the jobs' throughput.

Kept on standbys too, so a new leader judges a bake with what was seen before it took over. Bounded: the
newest ``EVIDENCE`` faults and leak reports, the newest ``SAMPLES`` throughput readings per job.
"""

from __future__ import annotations

from collections import deque

from myolo.coordinator.jobs.interface import JobsAPI
from myolo.coordinator.rollouts import gates
from myolo.events.payloads import LeakReport, NodeFault
from myolo.events.payloads.models import GateResult

EVIDENCE = 100_000  # faults and leak reports kept (the newest)
SAMPLES = 10_000  # throughput readings kept per job (the newest)


def leak_series(r: LeakReport) -> str:
    """A leak report's memory series, readable: ``gpu 0``, ``pid 88 on gpu 1``, ``host rss of pid 88``."""
    if r.subject == "gpu":
        return f"gpu {r.gpu_index}"
    if r.subject == "process_gpu":
        return f"pid {r.pid} on gpu {r.gpu_index}"
    return f"host rss of pid {r.pid}"


class Evidence:
    """The faults, leak reports and throughput samples seen, and the questions the gates ask of them."""

    def __init__(self) -> None:
        self.faults: deque[gates.Fault] = deque(maxlen=EVIDENCE)
        self.leaks: deque[gates.Leak] = deque(maxlen=EVIDENCE)
        self.throughput: dict[str, deque[tuple[float, float]]] = {}
        self._seen_progress: dict[str, float] = {}

    def fault(self, data: NodeFault, now: float) -> None:
        if data.health == "fail":
            self.faults.append(gates.Fault(now, data.node_id, "; ".join(data.reasons) or data.kind))

    def leak(self, data: LeakReport, now: float) -> None:
        self.leaks.append(gates.Leak(now, data.node_id, leak_series(data), data.slope_pct_per_h, data.lower_pct_per_h))

    def sample(self, jobs: JobsAPI, now: float) -> None:
        """Note each running job's tokens/s once per progress report."""
        for t in jobs.trainings():
            if not t.running or t.tokens_per_s is None or t.reported is None:
                continue
            if self._seen_progress.get(t.job) == t.reported:
                continue
            self._seen_progress[t.job] = t.reported
            self.throughput.setdefault(t.job, deque(maxlen=SAMPLES)).append((now, t.tokens_per_s))

    def rates(self, job: str, since: float, until: float) -> list[float]:
        """The job's samples from ``since`` to ``until`` (both included)."""
        return [v for t, v in self.throughput.get(job, ()) if since <= t <= until]

    def faults_gate(self, nodes: set[str], since: float, until: float) -> GateResult:
        return gates.faults(self.faults, nodes, since, until)

    def leaks_gate(self, nodes: set[str], since: float, until: float, limit: float) -> GateResult:
        return gates.leaks(self.leaks, nodes, since, until, limit)
