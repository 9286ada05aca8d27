"""The capacity benchmark's verdict: a lag that rises is told from one that wobbles, and "sustained" needs every
check; the fleet is split into slices that cover every node once, and faults land on distinct nodes."""

from __future__ import annotations

from tests.benchmarks.bench_capacity import lag_trend, slices, verdict
from tests.benchmarks.capacity_children import fault_targets

RATE = 10_000.0  # records per second


def _series(lag_at, seconds: int = 60) -> list[tuple[float, int]]:
    return [(float(t), int(lag_at(t))) for t in range(seconds)]


def test_a_wobbling_lag_is_bounded_and_not_growing() -> None:
    trend = lag_trend(_series(lambda t: 3000 if t % 2 else 200), RATE)
    assert trend["growing"] is False and trend["bounded"] is True


def test_a_lag_rising_by_5pct_of_the_rate_is_growing() -> None:
    trend = lag_trend(_series(lambda t: 0.05 * RATE * t), RATE)
    assert trend["growing"] is True
    assert trend["slope_share_of_rate"] == 0.05


def test_a_rise_that_stays_under_one_second_of_samples_is_not_growing() -> None:
    rate = 1000.0  # 25 records/s more each second: 2.5 % of the rate
    assert lag_trend(_series(lambda t: 25 * t, 30), rate)["growing"] is False  # 725 records at the end
    assert lag_trend(_series(lambda t: 25 * t + 500, 30), rate)["growing"] is True  # 1,225 at the end


def test_a_lag_over_five_seconds_of_samples_is_not_bounded() -> None:
    assert lag_trend(_series(lambda t: 6 * RATE), RATE)["bounded"] is False


def test_too_few_points_say_nothing() -> None:
    trend = lag_trend([(0.0, 0), (1.0, 5)], RATE)
    assert trend["growing"] is None
    assert verdict(RATE, RATE, trend, 10.0, 30, 30)["sustained"] is False


def test_sustained_needs_every_check() -> None:
    ok_lag = {"growing": False, "bounded": True}
    assert verdict(RATE, 0.96 * RATE, ok_lag, 900.0, 30, 30) == {
        "sustained": True,
        "checks": dict.fromkeys(
            (
                "simulators_within_5pct_of_rate",
                "lag_not_growing",
                "lag_bounded",
                "every_fault_cordoned",
                "fault_to_cordon_p99_under_1s",
            ),
            True,
        ),
        "failed": [],
    }
    assert verdict(RATE, 0.94 * RATE, ok_lag, 900.0, 30, 30)["failed"] == ["simulators_within_5pct_of_rate"]
    assert verdict(RATE, RATE, ok_lag, 1000.0, 30, 30)["failed"] == ["fault_to_cordon_p99_under_1s"]
    assert verdict(RATE, RATE, ok_lag, 100.0, 30, 29)["failed"] == ["every_fault_cordoned"]
    assert verdict(RATE, RATE, ok_lag, None, 0, 0)["sustained"] is False


def test_slices_cover_the_fleet_and_faults_land_on_distinct_nodes() -> None:
    assert slices(10_000, 3) == [3334, 3333, 3333]
    assert slices(2, 4) == [1, 1]
    for nodes, faults in ((5000, 30), (300, 10), (7, 30), (1, 1)):
        got = fault_targets(nodes, faults)
        assert len(got) == min(nodes, faults) == len(set(got))
        assert all(0 <= n < nodes for n in got)
