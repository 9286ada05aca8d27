"""The jobs' series for ``GET /metrics``: jobs by phase, each job's phase, generation and restarts, and the
controller's decisions (counted as this coordinator writes them, so on the leader that made them)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, get_args

from myolo.coordinator.jobs.records import Decision, DecisionKind, JobRecord, Phase


def new_decisions(before: JobRecord | None, after: JobRecord) -> list[Decision]:
    """The decisions ``after`` adds to ``before`` (the record keeps the newest ones: the list is cut from the
    front, and grows at the back)."""
    old = before.status.decisions if before is not None else []
    new = after.status.decisions
    if not old:
        return list(new)
    for i in range(len(new) - 1, -1, -1):
        if new[i] == old[-1]:
            return list(new[i + 1 :])
    return list(new)


def series(records: Iterable[JobRecord], decisions: Counter[str]) -> dict[str, list[tuple[tuple[str, ...], Any]]]:
    records = list(records)
    phases = Counter(r.status.phase for r in records)
    return {
        "myolo_jobs": [((p,), float(phases[p])) for p in get_args(Phase)],
        "myolo_job_phase": [
            ((r.name, p), 1.0 if r.status.phase == p else 0.0) for r in records for p in get_args(Phase)
        ],
        "myolo_job_generation": [((r.name,), float(r.status.generations)) for r in records],
        "myolo_job_restarts_total": [((r.name,), float(r.status.restarts)) for r in records],
        "myolo_scheduling_decisions_total": [((k,), float(decisions[k])) for k in get_args(DecisionKind)],
    }
