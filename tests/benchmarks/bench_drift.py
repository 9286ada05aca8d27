"""Drift detection in simulated time: how soon a real shift is detected, how often a stationary stream alarms.

The stream: 1,000 requests an hour, 20 numeric features, each standard normal and independent. Each feature's
reference is learned from its first ``reference_count`` values (5,000: five hours), then the window (one hour
in six 10-minute buckets) is evaluated every 10 minutes, as ``myolo.coordinator.drift.monitor.Monitor`` does.

- Delay: a mean shift of 0.3 standard deviations on 3 of the 20 features, starting at a uniformly random time
  between hours 6 and 30; the delay is from the shift to the first detection (median and p95 over
  ``--trials`` seeded trials; a trial that has not detected 12 h after the shift counts as missed).
- False alarms: stationary streams of ``--days`` days each, ``--seeds`` of them; every detection is false.

Each statistic is tried alone (PSI at 0.25 and at 0.1, KS, Wasserstein, each deciding by itself with the
default share, consecutive count and correction), KS or W1 (``combine="any"``, with the default share and
with 0.1, where the tuning started), and the defaults of ``DriftRule`` (combined: KS and W1 both). Two more stationary scenarios show where single tests break: 250
requests an hour (W1's fixed threshold against noise), and 5 features (the share rule then needs one).

The long runs compute the statistics of every evaluation at once with numpy (``_window_stats``; 167 values a
bucket, 1,002 an hour), from references built by ``numeric_reference`` and through the monitor's own
``Streak``; ``_check`` compares them, value by value and verdict by verdict, with ``rule.evaluate`` on
evaluations of the first stationary stream (it raises if they differ). ``--monitor-trials`` trials go through
``Monitor`` end to end (a ``DriftSample`` a minute, Poisson batches of 1,000 an hour). Writes
results/drift.json; method and figures in drift.md.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, dataclass
from typing import Any

import msgspec
import numpy as np
import scipy.stats

from myolo.coordinator.drift.monitor import Monitor, Streak
from myolo.coordinator.drift.reference import NumericReference, Values, numeric_reference
from myolo.coordinator.drift.rule import DriftRule, evaluate
from myolo.coordinator.drift.stats import PSI_EPSILON
from myolo.events.payloads.external import DriftSample, FeatureSummary
from tests.benchmarks.common import percentile, write_result

HOUR = 3600.0
SHIFT = 0.3  # standard deviations
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z, a multiple of every bucket length used here
HORIZON_H = 12.0  # a trial that has not detected this long after the shift has missed it
BLOCK = 1024  # evaluations computed together

CONFIGS: dict[str, DriftRule] = {
    "psi": DriftRule(numeric_tests=["psi"]),
    "psi_0.1": DriftRule(numeric_tests=["psi"], psi_threshold=0.1),
    "ks": DriftRule(numeric_tests=["ks"]),
    "wasserstein": DriftRule(numeric_tests=["wasserstein"]),
    "ks_or_wasserstein": DriftRule(combine="any"),
    "ks_or_wasserstein_share_0.1": DriftRule(combine="any", share_threshold=0.1),  # where the tuning started
    "combined": DriftRule(),  # the defaults: KS and W1 (both), share 0.15, 2 in a row
}


@dataclass(frozen=True)
class Scenario:
    """The traffic: ``rate`` requests an hour, ``features`` standard normal features, ``shifted`` of them
    shifted by ``SHIFT`` standard deviations in a delay trial."""

    rate: int = 1000
    features: int = 20
    shifted: int = 3


MAIN = Scenario()


@dataclass(frozen=True)
class Stream:
    """One feature's traffic as buckets of equal size: ``values[b]`` arrived in bucket b."""

    values: np.ndarray  # (buckets, per_bucket)


@dataclass(frozen=True)
class WindowStats:
    """One feature's statistics at every evaluation (index e: the window of buckets k-B..k-1, k = first + e)."""

    psi: np.ndarray
    ks: np.ndarray
    wasserstein: np.ndarray


@dataclass(frozen=True)
class Run:
    """A simulated stream of every feature: detection times per rule, the verdicts, and what they came from."""

    found: dict[str, list[float]]
    fired: dict[str, np.ndarray]  # (evaluations, features)
    stats: list[WindowStats]
    streams: list[Stream]
    refs: list[NumericReference]
    first: int  # the bucket boundary of the first evaluation


def _per_bucket(rule: DriftRule, scenario: Scenario) -> int:
    """Values in a bucket: the vectorised runs draw the same number in each (1,000 an hour: 167 a bucket)."""
    return round(scenario.rate * rule.window_s / HOUR / rule.buckets)


def _stream(rng: np.random.Generator, buckets: int, per_bucket: int, bucket_s: float, shift_at: float | None) -> Stream:
    values = rng.standard_normal((buckets, per_bucket))
    if shift_at is not None:  # each value arrives at its own time, evenly spread in its bucket
        times = (np.arange(buckets)[:, None] + (np.arange(per_bucket)[None, :] + 0.5) / per_bucket) * bucket_s
        values += SHIFT * (times >= shift_at)
    return Stream(values)


def _reference(stream: Stream, rule: DriftRule) -> tuple[NumericReference, int]:
    """The feature's reference from its first ``reference_count`` values, and the first bucket boundary at
    which the monitor can evaluate (the end of the bucket that completed the reference)."""
    ref = numeric_reference("f", stream.values.ravel()[: rule.reference_count])
    return ref, -(-rule.reference_count // stream.values.shape[1])


def _rolling(per_bucket: np.ndarray, first: int, buckets: int) -> np.ndarray:
    """Sums over the ``buckets`` buckets before each boundary k = first..len (the window at k)."""
    s = np.concatenate([np.zeros((1, per_bucket.shape[1]), per_bucket.dtype), np.cumsum(per_bucket, axis=0)])
    k = np.arange(first, per_bucket.shape[0] + 1)
    return s[k] - s[np.maximum(k - buckets, 0)]


def _binned(values: np.ndarray, edges: np.ndarray, side: str) -> np.ndarray:
    """Counts per bucket of the cells ``edges`` cut (``np.searchsorted(edges, v, side)``): (buckets, cells)."""
    cells = len(edges) + 1
    idx = np.searchsorted(edges, values, side=side) + cells * np.arange(values.shape[0])[:, None]
    return np.bincount(idx.ravel(), minlength=cells * values.shape[0]).reshape(values.shape[0], cells)


def _w1_grid(n: int, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """W1 of samples of n and m values is the integral of |Q_u - Q_v| over (0, 1]; both quantile functions are
    constant between the breakpoints i/n and j/m (exact, in units of 1/(n m)): each piece's length and the
    order statistics it pairs."""
    ends = np.union1d(np.arange(1, n + 1) * m, np.arange(1, m + 1) * n)
    du = np.diff(np.concatenate([[0], ends])) / (n * m)
    return du, -(-ends // m) - 1, -(-ends // n) - 1


def _window_stats(stream: Stream, ref: NumericReference, first: int, rule: DriftRule) -> WindowStats:
    """PSI, KS and W1 of every window from ``first`` on, exactly as ``rule.evaluate`` computes them."""
    r = np.asarray(ref.values)
    m, b = r.size, rule.buckets
    # PSI: counts in the reference's quantile bins, per bucket, summed over each window
    counts = _rolling(_binned(stream.values, np.asarray(ref.psi_cuts), "right"), first, b).astype(float)
    shares = np.maximum(np.asarray(ref.psi_shares), PSI_EPSILON)
    shares /= shares.sum()
    c = np.maximum(counts / counts.sum(axis=1, keepdims=True), PSI_EPSILON)
    c /= c.sum(axis=1, keepdims=True)
    psi = np.sum((c - shares) * np.log(c / shares), axis=1)
    # KS and W1 from the sorted windows, a block of evaluations at a time (temporaries stay small)
    k = np.arange(first, stream.values.shape[0] + 1)
    n = b * stream.values.shape[1]
    du, iw, ir = _w1_grid(n, m)
    i = np.arange(1, n + 1)
    ks, w1 = np.empty(k.size), np.empty(k.size)
    for lo in range(0, k.size, BLOCK):
        kb = k[lo : lo + BLOCK]
        windows = np.sort(np.concatenate([stream.values[kb - b + q] for q in range(b)], axis=1), axis=1)
        # sup |F_W - F_R| is reached at a window value, or just left of one: i/n or (i-1)/n against #ref <= w_i
        below = np.searchsorted(r, windows.ravel(), side="right").reshape(windows.shape) / m
        ks[lo : lo + BLOCK] = np.maximum(np.abs(i / n - below), np.abs((i - 1) / n - below)).max(axis=1)
        w1[lo : lo + BLOCK] = np.abs(windows[:, iw] - r[ir]) @ du
    w1 /= ref.std if ref.std > 0 else 1.0
    return WindowStats(psi, ks, w1)


def _fired(per_feature: list[WindowStats], rule: DriftRule, n: int, reference_count: int) -> np.ndarray:
    """(evaluations, features): whether each feature drifted under ``rule`` (as ``rule.decide`` says)."""
    tests = {}
    if "ks" in rule.numeric_tests:
        if rule.correction == "fdr_bh":
            raise ValueError("correction: the vectorised runs do Bonferroni or none; fdr_bh needs each p-value")
        alpha = rule.alpha / len(per_feature) if rule.correction == "bonferroni" else rule.alpha
        critical = scipy.stats.kstwo.isf(alpha, round(n * reference_count / (n + reference_count)))
        tests["ks"] = np.stack([s.ks for s in per_feature], axis=1) > critical  # p < alpha
    if "psi" in rule.numeric_tests:
        tests["psi"] = np.stack([s.psi for s in per_feature], axis=1) >= rule.psi_threshold
    if "wasserstein" in rule.numeric_tests:
        tests["wasserstein"] = np.stack([s.wasserstein for s in per_feature], axis=1) >= rule.wasserstein_threshold
    fired = np.stack(list(tests.values()))
    return fired.any(axis=0) if rule.combine == "any" else fired.all(axis=0)


def _detections(fired: np.ndarray, times: np.ndarray, rule: DriftRule) -> list[float]:
    """Detection times of the evaluations' verdicts, through the monitor's own streak."""
    needed = rule.drifted_needed(fired.shape[1])
    streak = Streak(rule.consecutive, rule.window_s)
    drifted = fired.sum(axis=1) >= needed
    return [float(t) for t, d in zip(times, drifted, strict=True) if streak.update(bool(d), float(t)).detected]


def _simulate(
    rng: np.random.Generator, hours: float, shift_at: float | None, rules: dict[str, DriftRule], scenario: Scenario
) -> Run:
    base = next(iter(rules.values()))  # every rule shares the window, the buckets and the reference count
    bucket_s = base.window_s / base.buckets
    buckets, per_bucket = round(hours * HOUR / bucket_s), _per_bucket(base, scenario)
    streams = [
        _stream(rng, buckets, per_bucket, bucket_s, shift_at if f < scenario.shifted else None)
        for f in range(scenario.features)
    ]
    refs, stats, first = [], [], 0
    for s in streams:
        ref, first = _reference(s, base)
        refs.append(ref)
        stats.append(_window_stats(s, ref, first, base))
    times = np.arange(first, buckets + 1) * bucket_s
    n = per_bucket * base.buckets
    fired = {name: _fired(stats, rule, n, base.reference_count) for name, rule in rules.items()}
    found = {name: _detections(f, times, rules[name]) for name, f in fired.items()}
    return Run(found, fired, stats, streams, refs, first)


def _check(run: Run, rules: dict[str, DriftRule]) -> dict[str, Any]:
    """The vectorised statistics and verdicts against ``rule.evaluate`` on the same windows: evaluations spread
    over the stream, and those where a feature fired under some rule. They must agree."""
    evals = len(run.stats[0].ks)
    fired_any = np.flatnonzero(np.any([f.any(axis=1) for f in run.fired.values()], axis=0))
    picks = sorted(set(np.linspace(0, evals - 1, 12).astype(int)) | set(fired_any[:40]))
    worst = {"psi": 0.0, "ks": 0.0, "wasserstein": 0.0}
    refs = {f"f{f:03d}": r for f, r in enumerate(run.refs)}
    for e in picks:
        k = run.first + e
        b = next(iter(rules.values())).buckets
        windows = {
            f"f{f:03d}": Values(s.values[k - b : k].ravel(), b * s.values.shape[1]) for f, s in enumerate(run.streams)
        }
        for name, rule in rules.items():
            result = evaluate(refs, windows, rule)
            got = np.array([fd.drifted for fd in result.features])
            if not np.array_equal(got, run.fired[name][e]):
                raise AssertionError(f"{name}, evaluation {e}: vectorised {run.fired[name][e]} != rule.evaluate {got}")
        for f, fd in enumerate(result.features):
            for stat in worst:
                worst[stat] = max(worst[stat], abs(getattr(fd, stat) - getattr(run.stats[f], stat)[e]))
    if max(worst.values()) > 1e-9:
        raise AssertionError(f"the vectorised statistics differ from rule.evaluate: {worst}")
    return {
        "evaluations_compared": len(picks),
        "with_a_feature_fired": min(len(fired_any), 40),
        "max_abs_difference": worst,
    }


def stationary(
    scenario: Scenario, seeds: int, days: float, rules: dict[str, DriftRule], check: bool = False
) -> dict[str, Any]:
    """False alarms on ``seeds`` stationary streams of ``days`` days each."""
    alarms = {name: 0 for name in rules}
    windows = {name: 0 for name in rules}
    fire = {name: 0.0 for name in rules}
    evals = 0
    out: dict[str, Any] = {"scenario": asdict(scenario) | {"shifted": 0}}
    for seed in range(seeds):
        run = _simulate(
            np.random.default_rng([7, scenario.rate, scenario.features, seed]), days * 24, None, rules, scenario
        )
        evals += len(run.stats[0].ks)
        for name, rule in rules.items():
            alarms[name] += len(run.found[name])
            windows[name] += int((run.fired[name].sum(axis=1) >= rule.drifted_needed(scenario.features)).sum())
            fire[name] += float(run.fired[name].sum())
        if check and seed == 0:
            out["check_against_rule_evaluate"] = _check(run, rules)
    total = seeds * days
    out |= {
        "seeds": seeds,
        "days_each": days,
        "evaluations": evals,
        "false_alarms": alarms,
        "false_alarms_per_30_days": {k: round(v * 30 / total, 3) for k, v in alarms.items()},
        "drifted_windows_per_evaluation": {k: float(f"{v / evals:.3g}") for k, v in windows.items()},
        "feature_drifted_per_evaluation": {k: float(f"{v / evals / scenario.features:.3g}") for k, v in fire.items()},
    }
    return out


def delays(trials: int, rules: dict[str, DriftRule], scenario: Scenario = MAIN) -> dict[str, Any]:
    """Delay from a shift at a random time (hours 6..30) to the first detection after it."""
    got: dict[str, list[float]] = {name: [] for name in rules}
    missed = {name: 0 for name in rules}
    before = {name: 0 for name in rules}
    for trial in range(trials):
        rng = np.random.default_rng([11, trial])
        shift_at = float(rng.uniform(6, 30)) * HOUR
        run = _simulate(rng, shift_at / HOUR + HORIZON_H, shift_at, rules, scenario)
        for name, times in run.found.items():
            before[name] += sum(t < shift_at for t in times)
            after = [t - shift_at for t in times if t >= shift_at]
            if after:
                got[name].append(after[0] / 60)
            else:
                missed[name] += 1
    return {
        "trials": trials,
        "scenario": asdict(scenario) | {"shift_sd": SHIFT},
        "delay_min": {
            name: {"median": _q(v, 50), "p95": _q(v, 95), "max": round(max(v), 1) if v else None}
            for name, v in got.items()
        },
        "missed_within_12h": missed,
        "false_alarms_before_shift": before,
    }


def _q(values: list[float], q: float) -> float | None:
    return round(percentile(values, q), 1) if values else None


def monitor_trials(trials: int, scenario: Scenario = MAIN) -> dict[str, Any]:
    """End to end: a DriftSample a minute (Poisson batches, 1,000 an hour) through Monitor with the defaults."""
    out = []
    for trial in range(trials):
        rng = np.random.default_rng([13, trial])
        shift_at = float(rng.uniform(6, 30)) * HOUR
        monitor = Monitor("bench", "1", DriftRule(), seed=trial)
        delay, before, evals = None, 0, 0
        for minute in range(int((shift_at / HOUR + HORIZON_H) * 60)):
            now = START + minute * 60.0 + 30.0
            k = int(rng.poisson(scenario.rate / 60))
            x = rng.standard_normal((scenario.features, k))
            arrived = minute * 60.0 + (np.arange(k) + 0.5) * 60.0 / max(k, 1)
            x[: scenario.shifted] += SHIFT * (arrived >= shift_at)
            features = {f"f{f:03d}": FeatureSummary(values=x[f].tolist()) for f in range(scenario.features)}
            observed = monitor.observe(DriftSample(model="bench", version="1", count=k, features=features), now)
            if observed.refused:
                raise AssertionError(f"the monitor refused {observed.refused}")
            result = monitor.evaluate(now)
            if result is None:
                continue
            evals += 1
            if result.detected and now - START < shift_at:
                before += 1
            elif result.detected:
                delay = round((now - START - shift_at) / 60, 1)
                break
        out.append(
            {"shift_at_h": round(shift_at / HOUR, 2), "delay_min": delay, "alarms_before": before, "evaluations": evals}
        )
    return {"trials": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=200, help="seeded shift trials")
    ap.add_argument("--seeds", type=int, default=4, help="stationary streams of the main scenario")
    ap.add_argument("--days", type=float, default=90.0, help="days of each stationary stream")
    ap.add_argument("--monitor-trials", type=int, default=3, help="shift trials through Monitor end to end")
    args = ap.parse_args()
    t0 = time.process_time()
    side = {name: CONFIGS[name] for name in ("ks", "wasserstein", "ks_or_wasserstein", "combined")}
    few = Scenario(features=5, shifted=1)
    few_rules = side | {"combined_alpha_0.0002": DriftRule(alpha=0.0002)}
    result: dict[str, Any] = {
        "rules": {name: msgspec.to_builtins(rule) for name, rule in CONFIGS.items()},
        "delay": delays(args.trials, CONFIGS),
        "stationary": stationary(MAIN, args.seeds, args.days, CONFIGS, check=True),
        # why both tests decide: W1's fixed threshold against noise at low traffic
        "stationary_250_per_hour": stationary(Scenario(rate=250), max(1, args.seeds // 2), args.days, side),
        # where the share rule needs a single feature (up to 6 features at 0.15), and what alpha it then needs
        "stationary_5_features": stationary(few, max(1, args.seeds // 2), args.days, few_rules),
        "delay_1_of_5_features": delays(max(1, args.trials // 2), few_rules, few),
        "monitor_end_to_end": monitor_trials(args.monitor_trials),
    }
    result["cpu_s"] = round(time.process_time() - t0, 1)
    write_result("drift", result)


if __name__ == "__main__":
    main()
