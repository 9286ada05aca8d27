"""A wave's gates over its bake window, as pure functions of what was seen: each returns a ``GateResult``.

``passed`` is True or False when the data decides, and None when there was nothing to judge (no job ran on
the wave's nodes, no leak report came): such a gate does not stop the wave, and says so in its detail, so
"no data" is never silently a pass nor a failure. A job that had a baseline but reported nothing during the
bake fails the throughput gate: a release that stops training must not pass for lack of figures.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import fmean

from myolo.events.payloads.models import GateResult


@dataclass(frozen=True)
class Fault:
    time: float
    node_id: str
    reason: str


@dataclass(frozen=True)
class Leak:
    time: float
    node_id: str
    series: str  # "gpu 0", "pid 1234 on gpu 1", "host rss of pid 88"
    slope_pct_per_h: float
    lower_pct_per_h: float


def faults(seen: Iterable[Fault], nodes: set[str], since: float, until: float) -> GateResult:
    hits = [f for f in seen if f.node_id in nodes and since <= f.time <= until]
    if not hits:
        return GateResult(gate="faults", passed=True, detail=f"no FAIL fault on {len(nodes)} node(s)")
    first = hits[0]
    return GateResult(
        gate="faults",
        passed=False,
        detail=f"{len(hits)} FAIL fault(s); first on {first.node_id}: {first.reason}",
        figures={"faults": float(len(hits))},
    )


def leaks(seen: Iterable[Leak], nodes: set[str], since: float, until: float, limit: float) -> GateResult:
    """A series leaks when its estimate is at or over ``limit`` %/h and its lower bound is above 0 (the
    detector is confident it grows); the newest report of each series counts."""
    newest: dict[tuple[str, str], Leak] = {}
    for r in seen:
        if r.node_id in nodes and since <= r.time <= until:
            newest[(r.node_id, r.series)] = r
    if not newest:
        return GateResult(gate="leak", passed=None, detail="no leak report from the wave's nodes during the bake")
    figures = {f"{n} {s}": round(r.slope_pct_per_h, 4) for (n, s), r in newest.items()}
    bad = [r for r in newest.values() if r.slope_pct_per_h >= limit and r.lower_pct_per_h > 0]
    if not bad:
        top = max(newest.values(), key=lambda r: r.slope_pct_per_h)
        return GateResult(
            gate="leak",
            passed=True,
            detail=f"{len(newest)} series, the steepest {top.slope_pct_per_h:+.3f} %/h (< {limit} %/h)",
            figures=figures,
        )
    worst = max(bad, key=lambda r: r.slope_pct_per_h)
    return GateResult(
        gate="leak",
        passed=False,
        detail=f"{worst.node_id} {worst.series} grows {worst.slope_pct_per_h:+.3f} %/h (>= {limit} %/h)",
        figures=figures,
    )


def throughput(baseline: dict[str, float], during: dict[str, Sequence[float]], tolerance: float) -> GateResult:
    """Each job's mean per-replica tokens/s over the bake against its mean before the wave."""
    if not baseline:
        return GateResult(gate="throughput", passed=None, detail="no job ran on the wave's nodes before it")
    figures: dict[str, float] = {}
    problems: list[str] = []
    for job, before in sorted(baseline.items()):
        readings = during.get(job) or []
        if not readings:
            problems.append(f"{job} reported no progress during the bake")
            continue
        ratio = fmean(readings) / before if before > 0 else 0.0
        figures[job] = round(ratio - 1.0, 5)
        if abs(ratio - 1.0) > tolerance:
            problems.append(f"{job} at {ratio - 1.0:+.1%} of its {before:.1f} tokens/s")
    if problems:
        return GateResult(
            gate="throughput", passed=False, detail=f"beyond +-{tolerance:.0%}: " + "; ".join(problems), figures=figures
        )
    return GateResult(
        gate="throughput", passed=True, detail=f"{len(baseline)} job(s) within +-{tolerance:.0%}", figures=figures
    )
