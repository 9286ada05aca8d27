"""Leak detector figures on simulated time: detection delay of a 0.5 %/h leak, false alarms per 100 node-days
on leak-free series with the same noise, and the estimator's cost per update.

Run: ``.venv/bin/python tests/benchmarks/bench_leak.py [--leaky 200] [--days 200] [--workers 2]``; writes
tests/benchmarks/results/leak.json. Series are read at the agent's 1 Hz; a node is 8 GPU series, so
node-days = series-days / 8. Parameters of the synthetic series are in agent/leak/synthetic.py.
A false-alarm rate near 1 per 100 node-days needs a few hundred node-days to tell apart from 0 or 3:
``--days 2400 --late 150`` (300 node-days), a long run. leak.md beside this file records the variants of the
detector measured and left out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from multiprocessing import Pool
from pathlib import Path

import msgspec
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from myolo.agent.leak.config import LeakConfig
from myolo.agent.leak.series import LeakSeries
from myolo.agent.leak.synthetic import Profile, synthetic_series

CAP = 141e9
GPUS_PER_NODE = 8
RATE = 0.5


def detect(args: tuple[int, float, float]) -> float:
    """Minutes from leak onset to the first alert (inf when never within the series)."""
    seed, onset_s, duration_s = args
    t, v = synthetic_series(np.random.default_rng(seed), duration_s, 1.0, leak_pct_per_h=RATE, leak_onset_s=onset_s)
    series = LeakSeries(CAP)
    early = False
    for verdict in series.add_many(t, v):
        if verdict.alert and verdict.at < onset_s:
            early = True  # an alarm before the leak began is a false alarm, not a detection
        if verdict.alert and verdict.at >= onset_s and not early:
            return (verdict.at - onset_s) / 60.0
    return math.inf


def leak_free_day(seed: int) -> tuple[int, float, int, float]:
    """(alarm episodes, highest lower bound, evaluations, seconds spent in the detector) of one day."""
    t, v = synthetic_series(np.random.default_rng(seed), 86400.0, 1.0)
    series = LeakSeries(CAP)
    start = time.process_time()
    verdicts = series.add_many(t, v)
    spent = time.process_time() - start
    episodes = sum(1 for x in verdicts if x.changed and x.alert)
    return episodes, max(x.lower for x in verdicts), series.evaluations, spent


def _summary(minutes: np.ndarray) -> dict[str, object]:
    found = minutes[np.isfinite(minutes)]
    pct = {f"p{q}": round(float(np.percentile(found, q)), 2) for q in (10, 50, 90, 99)} if len(found) else {}
    return {
        "series": len(minutes),
        "found": len(found),
        "within_30_min": round(float(np.mean(minutes <= 30.0)), 4),
        "minutes": pct,
        "max_minutes": round(float(found.max()), 2) if len(found) else None,
        "histogram_5min": {f"{lo}-{lo + 5}": int(((found > lo) & (found <= lo + 5)).sum()) for lo in range(15, 60, 5)}
        | {">60": int((found > 60).sum()), "never": int((~np.isfinite(minutes)).sum())},
    }


def _by_cycle(seeds: range, minutes: np.ndarray) -> dict[str, dict[str, object]]:
    """Detection split by the series' fragmentation cycle, the one term that sets how fast a floor learns: a
    series without a cycle shows its floor at once, one with a long cycle shows one new floor level per cycle.
    ``synthetic_series`` draws its profile first, so the same seed gives the same profile here."""
    periods = np.array([Profile.draw(np.random.default_rng(seed)).frag_period_s for seed in seeds])
    groups = {
        "no_cycle": periods == 0,
        "cycle_2_4_min": (periods > 0) & (periods < 240),
        "cycle_4_6_min": (periods >= 240) & (periods < 360),
        "cycle_6_8_min": periods >= 360,
    }
    out: dict[str, dict[str, object]] = {}
    for name, mask in groups.items():
        found = minutes[mask]
        out[name] = {
            "series": int(mask.sum()),
            "within_30_min": round(float(np.mean(found <= 30.0)), 4) if len(found) else None,
            "p90_minutes": round(float(np.percentile(found, 90)), 2) if len(found) else None,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--leaky", type=int, default=200, help="leaking series (leak from the trainer's start)")
    ap.add_argument("--late", type=int, default=40, help="leaking series whose leak starts after 3 h")
    ap.add_argument("--days", type=int, default=400, help="leak-free series-days")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "leak.json"))
    args = ap.parse_args()
    wall = time.perf_counter()
    with Pool(args.workers) as pool:
        start_seeds, late_seeds = range(10_000, 10_000 + args.leaky), range(20_000, 20_000 + args.late)
        from_start = np.array(pool.map(detect, [(seed, 0.0, 5400.0) for seed in start_seeds]))
        late = np.array(pool.map(detect, [(seed, 3 * 3600.0, 6 * 3600.0) for seed in late_seeds]))
        days = pool.map(leak_free_day, range(30_000, 30_000 + args.days))
    episodes = sum(d[0] for d in days)
    evaluations = sum(d[2] for d in days)
    node_days = args.days / GPUS_PER_NODE
    per100 = 100.0 * episodes / node_days
    upper95 = 100.0 * (3.0 if episodes == 0 else episodes + 1.96 * math.sqrt(episodes) + 1) / node_days
    result = {
        "leak_pct_per_h": RATE,
        "config": msgspec.structs.asdict(LeakConfig()),
        "sample_interval_s": 1.0,
        "detection_from_trainer_start": _summary(from_start) | {"by_cycle": _by_cycle(start_seeds, from_start)},
        "detection_leak_starting_after_3h": _summary(late) | {"by_cycle": _by_cycle(late_seeds, late)},
        "false_alarms": {
            "series_days": args.days,
            "node_days": node_days,
            "episodes": episodes,
            "series_with_alarm": sum(1 for d in days if d[0]),
            "per_100_node_days": round(per100, 3),
            "per_100_node_days_upper95": round(upper95, 2),
            "highest_lower_bound_pct_per_h": round(max(d[1] for d in days), 4),
        },
        "cost": {
            "evaluations": evaluations,
            "cpu_s_per_series_day": round(sum(d[3] for d in days) / args.days, 4),
            "us_per_evaluation_incl_ingest": round(1e6 * sum(d[3] for d in days) / max(evaluations, 1), 1),
            "us_per_reading": round(1e6 * sum(d[3] for d in days) / (args.days * 86400), 3),
        },
        "wall_s": round(time.perf_counter() - wall, 1),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
