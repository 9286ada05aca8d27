"""The rollouts' series for ``GET /metrics``: rollouts by phase, and the gates their waves were judged by, by
gate and result (passed, failed, or no_data), from the records every coordinator holds."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, get_args

from myolo.coordinator.rollouts.records import Phase, RolloutRecord


def series(records: Iterable[RolloutRecord]) -> dict[str, list[tuple[tuple[str, ...], Any]]]:
    records = list(records)
    phases = Counter(r.status.phase for r in records)
    gates: Counter[tuple[str, str]] = Counter()
    for r in records:
        for wave in r.status.waves:
            for g in wave.gates:
                gates[(g.gate, "no_data" if g.passed is None else "passed" if g.passed else "failed")] += 1
    return {
        "myolo_rollouts": [((p,), float(phases[p])) for p in get_args(Phase)],
        "myolo_rollout_gates_total": [(key, float(n)) for key, n in sorted(gates.items())],
    }
