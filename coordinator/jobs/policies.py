"""The scaling policies and the straggler rule: pure functions of a job's measured metrics and the time.

A policy fires when its metric's mean over its window crosses the threshold, its cooldown since the last
resize has passed, and its action can apply (scaleOut below maxReplicas, scaleIn above minReplicas). Which
way is "crossing" depends on the metric: high GPU utilisation, gradient staleness and step time are the
problem, so they fire at or above the threshold; throughput is the problem when it is low, so
``tokens_per_s`` fires at or below it. Policies are tried in the manifest's order (the operator's
priority), and the first that fires is the verdict; one whose action cannot apply lets the next one try.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from myolo.coordinator.jobs.manifest import Action, Metric, Policy
from myolo.coordinator.jobs.metrics import METRICS, JobMetrics

LOW_IS_BAD: frozenset[str] = frozenset({"tokens_per_s"})
UNITS: dict[str, str] = {"gpu_util": "%", "step_time": " s", "tokens_per_s": " tokens/s", "gradient_staleness": ""}


@dataclass(frozen=True)
class PolicyFiring:
    """A policy that fired: what to do, the value that made it fire, and every metric over its window."""

    action: Action
    policy: Policy
    value: float
    reason: str
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Straggler:
    """A replica far slower than the others, the node it runs on when known, and the figures."""

    dp_rank: int
    node_id: str | None
    step_time_s: float
    median_others_s: float
    ratio: float
    factor: float
    window_s: float

    @property
    def reason(self) -> str:
        where = f" on {self.node_id}" if self.node_id else ""
        return (
            f"replica {self.dp_rank}{where}: step_time {fmt(self.step_time_s)} s over {fmt(self.window_s)} s is "
            f"{fmt(self.ratio)}x the median of the others ({fmt(self.median_others_s)} s) > {fmt(self.factor)}x"
        )

    @property
    def metrics(self) -> dict[str, float]:
        return {
            "dp_rank": float(self.dp_rank),
            "step_time": self.step_time_s,
            "median_others": self.median_others_s,
            "ratio": self.ratio,
            "factor": self.factor,
            "window_s": self.window_s,
        }


def fmt(x: float) -> str:
    """A number for a sentence: 75 not 75.0, 91.2, 0.0523, 45000."""
    if not math.isfinite(x):
        return str(x)
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.1f}" if abs(x) >= 10 else f"{x:.3g}"


def crosses(metric: Metric, value: float, threshold: float) -> bool:
    return value <= threshold if metric in LOW_IS_BAD else value >= threshold


def evaluate(
    policies: Sequence[Policy],
    metrics: JobMetrics,
    now: float,
    last_resize: float | None,
    replicas: int,
    min_replicas: int,
    max_replicas: int,
) -> PolicyFiring | None:
    """The first policy that fires, or None. ``last_resize`` None means the job was never resized."""
    for policy in policies:
        if last_resize is not None and now - last_resize < policy.cooldown_s:
            continue
        if policy.action == "scaleOut" and replicas >= max_replicas:
            continue
        if policy.action == "scaleIn" and replicas <= min_replicas:
            continue
        value = metrics.mean(policy.metric, policy.window_s, now)
        if value is None or not crosses(policy.metric, value, policy.threshold):
            continue
        return PolicyFiring(
            action=policy.action,
            policy=policy,
            value=value,
            reason=_reason(policy, value, last_resize),
            metrics=_context(policy, value, metrics, now, replicas),
        )
    return None


def _reason(policy: Policy, value: float, last_resize: float | None) -> str:
    unit = UNITS[policy.metric]
    op = "<=" if policy.metric in LOW_IS_BAD else ">="
    cooldown = f"cooldown {fmt(policy.cooldown_s)} s" + (" passed" if last_resize is not None else ": no resize yet")
    return (
        f"{policy.metric} {fmt(value)}{unit} over {fmt(policy.window_s)} s {op} {fmt(policy.threshold)}{unit} "
        f"({cooldown}): {policy.action}"
    )


def _context(policy: Policy, value: float, metrics: JobMetrics, now: float, replicas: int) -> dict[str, float]:
    """Every metric known over the policy's window, for the decision's record."""
    out = {m: v for m in METRICS if (v := metrics.mean(m, policy.window_s, now)) is not None}
    out.update({policy.metric: value, "threshold": policy.threshold, "window_s": policy.window_s})
    out["replicas"] = float(replicas)
    return out


def straggler(
    metrics: JobMetrics, now: float, window_s: float, factor: float = 2.0, min_replicas_to_compare: int = 2
) -> Straggler | None:
    """The replica whose mean step time over the window is more than ``factor`` x the median of the OTHER
    replicas' (the slowest such, by ratio), or None.

    DLRover's pre-flight check calls a node a straggler above 2x the median; the median of the others,
    not of all, because with two replicas the median of all includes the suspect and could never be
    exceeded twofold. Only replicas whose readings span half the window are compared, and at least
    ``min_replicas_to_compare`` of them (never fewer than 2: one replica has no one to be slower than)."""
    times = metrics.replica_step_times(window_s, now)
    if len(times) < max(2, min_replicas_to_compare):
        return None
    worst: Straggler | None = None
    for rank in sorted(times):
        median = statistics.median(v for r, v in times.items() if r != rank)
        if median <= 0 or times[rank] <= factor * median:
            continue
        ratio = times[rank] / median
        if worst is None or ratio > worst.ratio:
            worst = Straggler(rank, metrics.node_of(rank), times[rank], median, ratio, factor, window_s)
    return worst
