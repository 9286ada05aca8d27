"""The bake gates as the pure functions they are: each verdict (pass, fail, nothing to judge) from plain
evidence, with the window's bounds standing in for the clock."""

from __future__ import annotations

from myolo.coordinator.rollouts import gates
from myolo.coordinator.rollouts.gates import Fault, Leak

NODES = {"n1", "n2"}


def test_faults_pass_without_a_fail_fault_of_the_wave_in_the_window() -> None:
    seen = [Fault(5.0, "n1", "before the bake"), Fault(50.0, "n9", "another node"), Fault(200.0, "n2", "after")]
    g = gates.faults(seen, NODES, 10.0, 100.0)
    assert (g.gate, g.passed, g.detail) == ("faults", True, "no FAIL fault on 2 node(s)")
    assert g.figures == {}


def test_faults_fail_on_the_first_fault_in_the_window_and_count_them_all() -> None:
    seen = [Fault(20.0, "n2", "xid 79"), Fault(30.0, "n1", "ecc"), Fault(10.0, "n1", "at the start")]
    g = gates.faults(seen, NODES, 10.0, 100.0)
    assert g.passed is False and g.figures == {"faults": 3.0}
    assert g.detail == "3 FAIL fault(s); first on n2: xid 79"  # first in arrival order


def test_leaks_without_a_report_judge_nothing() -> None:
    outside = [Leak(500.0, "n1", "gpu 0", 9.0, 5.0), Leak(50.0, "n9", "gpu 0", 9.0, 5.0)]
    g = gates.leaks(outside, NODES, 10.0, 100.0, limit=0.2)
    assert (g.gate, g.passed) == ("leak", None) and "no leak report" in g.detail


def test_leaks_pass_below_the_limit_or_without_confidence_and_give_each_series() -> None:
    seen = [
        Leak(20.0, "n1", "gpu 0", 0.1, 0.05),  # below the limit
        Leak(30.0, "n2", "host rss of pid 8", 0.9, 0.0),  # steep, but the lower bound is not above 0
    ]
    g = gates.leaks(seen, NODES, 10.0, 100.0, limit=0.2)
    assert g.passed is True
    assert g.figures == {"n1 gpu 0": 0.1, "n2 host rss of pid 8": 0.9}
    assert g.detail == "2 series, the steepest +0.900 %/h (< 0.2 %/h)"


def test_leaks_fail_on_a_confident_slope_at_the_limit_the_newest_report_of_a_series_counting() -> None:
    seen = [
        Leak(20.0, "n1", "gpu 0", 0.5, 0.3),
        Leak(40.0, "n1", "gpu 0", 0.05, 0.01),  # the newest of n1 gpu 0: it stopped growing
        Leak(30.0, "n2", "pid 4 on gpu 1", 0.2, 0.1),  # at the limit, confident
    ]
    g = gates.leaks(seen, NODES, 10.0, 100.0, limit=0.2)
    assert g.passed is False and g.figures == {"n1 gpu 0": 0.05, "n2 pid 4 on gpu 1": 0.2}
    assert g.detail == "n2 pid 4 on gpu 1 grows +0.200 %/h (>= 0.2 %/h)"


def test_throughput_without_a_baseline_judges_nothing() -> None:
    g = gates.throughput({}, {"train": [100.0]}, 0.1)
    assert (g.gate, g.passed) == ("throughput", None) and "no job ran" in g.detail


def test_throughput_passes_within_the_tolerance() -> None:
    g = gates.throughput({"a": 100.0, "b": 50.0}, {"a": [95.0, 105.0], "b": [54.0]}, 0.1)
    assert g.passed is True and g.detail == "2 job(s) within +-10%"
    assert g.figures == {"a": 0.0, "b": 0.08}


def test_throughput_fails_beyond_the_tolerance_either_way() -> None:
    g = gates.throughput({"slow": 100.0, "fast": 100.0}, {"slow": [80.0], "fast": [130.0]}, 0.1)
    assert g.passed is False and g.figures == {"fast": 0.3, "slow": -0.2}
    assert g.detail == "beyond +-10%: fast at +30.0% of its 100.0 tokens/s; slow at -20.0% of its 100.0 tokens/s"


def test_throughput_fails_a_job_that_reported_nothing_during_the_bake() -> None:
    g = gates.throughput({"quiet": 100.0, "ok": 10.0}, {"ok": [10.0]}, 0.1)
    assert g.passed is False and g.figures == {"ok": 0.0}
    assert g.detail == "beyond +-10%: quiet reported no progress during the bake"


def test_throughput_of_a_job_with_a_zero_baseline_fails() -> None:
    g = gates.throughput({"idle": 0.0}, {"idle": [10.0]}, 0.1)
    assert g.passed is False and g.figures == {"idle": -1.0}
