"""What the coordinator keeps of one job in memory beside its state record, in one object per job.

The record (``myolo.state.jobs``) is what a new leader rebuilds from; this is what the coordinator heard
since: the metrics the policies judge, the workers' faults and completions, each replica's latest rate and the
members whose samples show no worker. Most of it is about the current generation and starts over with the
next one; all of it goes with the job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from myolo.coordinator.jobs.metrics import JobMetrics
from myolo.coordinator.jobs.reconcile import Evidence
from myolo.coordinator.jobs.records import Generation


@dataclass
class JobRuntime:
    metrics: JobMetrics = field(default_factory=JobMetrics)
    evidence: Evidence = field(default_factory=Evidence)
    rates: dict[int, float] = field(default_factory=dict)  # the latest tokens/s of each replica
    missing: dict[str, float] = field(default_factory=dict)  # members whose samples show no worker, since

    def next_generation(self, gen: Generation | None) -> None:
        """The generation changed: what was heard was about the previous one."""
        self.evidence = Evidence()
        self.rates.clear()
        self.missing.clear()
        if gen is not None:
            self.metrics.reset(gen.number, gen.replicas)
