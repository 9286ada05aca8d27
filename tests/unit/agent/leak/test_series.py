"""The leak verdict on simulated time: synthetic series with noise, plateaus, checkpoints, fragmentation.

The sample here is reduced (the benchmark, tests/benchmarks/bench_leak.py, measures the figures on a larger
one) but seeded and meaningful: 20 leaking trainers and 16 leak-free trainer-days at the agent's 1 Hz.
"""

from __future__ import annotations

import numpy as np
import pytest

from myolo.agent.leak.config import LeakConfig
from myolo.agent.leak.series import LeakSeries
from myolo.agent.leak.synthetic import Profile, synthetic_series

CAP = 141e9  # an H200


def _detect_minutes(
    seed: int, rate: float = 0.5, duration_s: float = 5400.0, onset_s: float = 0.0, config: LeakConfig | None = None
) -> float:
    """Minutes from the leak's onset to the first alert; an alert before the onset fails the test."""
    t, v = synthetic_series(np.random.default_rng(seed), duration_s, 1.0, leak_pct_per_h=rate, leak_onset_s=onset_s)
    series = LeakSeries(CAP, config)
    for verdict in series.add_many(t, v):
        if verdict.alert:
            assert verdict.at >= onset_s, f"false alarm at {verdict.at / 3600:.2f} h, before the leak began"
            return (verdict.at - onset_s) / 60.0
    return float("inf")


def test_half_percent_per_hour_leak_is_found_within_30_minutes() -> None:
    minutes = np.array([_detect_minutes(100 + i) for i in range(20)])
    assert np.all(np.isfinite(minutes)), minutes
    assert np.mean(minutes <= 30.0) >= 0.8, minutes
    assert np.median(minutes) <= 25.0, minutes


def test_leak_starting_after_hours_of_flat_memory_is_found_as_fast() -> None:
    """The short window's job: a leak that begins 3 h into a run must not wait until it fills the 2 h window."""
    minutes = np.array([_detect_minutes(700 + i, duration_s=5 * 3600.0, onset_s=3 * 3600.0) for i in range(10)])
    assert np.all(np.isfinite(minutes)), minutes
    assert np.mean(minutes <= 30.0) >= 0.8, minutes
    long_only = LeakConfig(short_window_s=0)
    slow = [_detect_minutes(700 + i, duration_s=5 * 3600.0, onset_s=3 * 3600.0, config=long_only) for i in range(3)]
    assert min(slow) > 45.0, slow  # the long window alone is much slower: the short one is doing the work


def test_no_false_alarm_on_leak_free_days() -> None:
    episodes = 0
    for seed in range(500, 516):
        t, v = synthetic_series(np.random.default_rng(seed), 86400.0, 1.0)
        series = LeakSeries(CAP)
        for verdict in series.add_many(t, v):
            episodes += verdict.changed and verdict.alert
    assert episodes == 0


def test_slope_estimate_tracks_the_true_rate() -> None:
    for rate in (0.5, 2.0):
        t, v = synthetic_series(np.random.default_rng(9), 3 * 3600.0, 1.0, leak_pct_per_h=rate)
        series = LeakSeries(CAP)
        series.add_many(t, v)
        assert series.last is not None
        assert series.last.slope == pytest.approx(rate, rel=0.25)
        assert series.last.lower <= rate * 1.1 and series.last.alert


def test_pure_step_is_a_plateau_not_a_leak() -> None:
    t = np.arange(0.0, 3 * 3600.0)
    rng = np.random.default_rng(2)
    pct = 60.0 + 0.02 * rng.standard_normal(len(t)) + np.where(t > 5400, 0.8, 0.0)
    series = LeakSeries(CAP)
    verdicts = series.add_many(t, pct * CAP / 100)
    assert verdicts and not any(v.alert for v in verdicts)


def test_checkpoint_spikes_and_sawtooth_are_ignored() -> None:
    t = np.arange(0.0, 4 * 3600.0)
    saw = 0.4 * ((t % 300) / 300)  # 5-minute fragmentation cycle released each time
    spikes = np.where((t % 1800) < 120, 4.0, 0.0)  # 2-minute checkpoint every 30 minutes
    pct = 70.0 + saw + spikes
    series = LeakSeries(CAP)
    verdicts = series.add_many(t, pct * CAP / 100)
    assert verdicts and not any(v.alert for v in verdicts)
    assert abs(verdicts[-1].slope) < 0.02


def test_nothing_before_warmup_and_floor_horizon() -> None:
    cfg = LeakConfig()
    t = np.arange(0.0, cfg.warmup_s + cfg.floor_horizon_s)
    series = LeakSeries(CAP, cfg)
    assert series.add_many(t, 1e9 + 1e6 * t) == []  # steep growth, but still warm-up + first horizon


def test_a_reset_series_gives_the_verdicts_of_a_new_one() -> None:
    t, v = synthetic_series(np.random.default_rng(3), 5400.0, 1.0, leak_pct_per_h=1.0)
    used = LeakSeries(CAP)
    assert any(x.alert for x in used.add_many(t, v))
    used.reset()
    assert (used.start, used.samples, used.alert, used.last, used.evaluations) == (None, 0, False, None, 0)
    again = used.add_many(t + 7200.0, v)  # a restarted trainer, two hours later: warm-up starts again
    fresh = LeakSeries(CAP).add_many(t + 7200.0, v)
    assert again == fresh and again


def test_alert_clears_when_growth_stops() -> None:
    t = np.arange(0.0, 8 * 3600.0)
    pct = 50.0 + np.minimum(t, 3 * 3600.0) / 3600.0 * 1.0  # 1 %/h for three hours, then flat
    series = LeakSeries(CAP)
    verdicts = series.add_many(t, pct * CAP / 100)
    flips = [(round(v.at / 3600, 1), v.alert) for v in verdicts if v.changed]
    assert flips[0][1] is True and flips[0][0] < 0.5
    assert flips[-1][1] is False and flips[-1][0] > 3.0


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"threshold_pct_per_h": 0}, "threshold_pct_per_h"),
        ({"window_s": 60}, "window_s"),
        ({"short_window_s": 9000}, "short_window_s"),
        ({"short_confidence": 0.97}, "short_confidence"),
        ({"confidence": 0.5}, "confidence"),
    ],
)
def test_bad_config_is_named(kw: dict[str, float], name: str) -> None:
    with pytest.raises(ValueError, match=f"leak.{name}"):
        LeakSeries(CAP, LeakConfig(**kw))  # type: ignore[arg-type]


def test_a_seed_names_its_profile() -> None:
    """The benchmark splits its figures by each series' fragmentation cycle, redrawing the profile from the
    seed: that only holds while ``synthetic_series`` draws its profile first, from the same generator."""
    rng = np.random.default_rng(42)
    drawn = Profile.draw(rng)
    assert np.array_equal(
        synthetic_series(np.random.default_rng(42), 600.0, 1.0)[1], synthetic_series(rng, 600.0, 1.0, profile=drawn)[1]
    )
    assert Profile.draw(np.random.default_rng(42)) == drawn


def test_bad_capacity_is_named() -> None:
    with pytest.raises(ValueError, match="capacity_bytes"):
        LeakSeries(0)
