"""The scaling policies (threshold over a window, direction per metric, cooldown, replica bounds, order) and
the straggler rule (> factor x the median of the other replicas), on plain numbers and a fake time."""

from __future__ import annotations

import pytest

from myolo.coordinator.jobs.manifest import Policy, parse_manifest
from myolo.coordinator.jobs.metrics import JobMetrics
from myolo.coordinator.jobs.policies import PolicyFiring, evaluate, fmt, straggler
from tests.unit.coordinator.jobs.test_metrics import progress, sample

NOW = 1000.0


def with_progress(seconds: float = 60, m: JobMetrics | None = None, **kw: object) -> JobMetrics:
    """A replica reporting once a second over the ``seconds`` before NOW."""
    m = m if m is not None else JobMetrics()
    for i in range(int(seconds) + 1):
        assert m.add_progress(progress(**kw), NOW - seconds + i)  # type: ignore[arg-type]
    return m


def with_util(util: float, seconds: float = 60) -> JobMetrics:
    m = JobMetrics()
    for i in range(int(seconds) + 1):
        assert m.add_gpu_util("a", [0], sample("a", {0: util}), NOW - seconds + i)
    return m


def policy(metric: str, threshold: float, action: str, window_s: float = 60, cooldown_s: float = 300) -> Policy:
    return Policy(metric=metric, threshold=float(threshold), action=action, window_s=window_s, cooldown_s=cooldown_s)  # type: ignore[arg-type]


GPU = policy("gpu_util", 75, "scaleOut")
STALE = policy("gradient_staleness", 10, "scaleIn")
SLOW = policy("step_time", 2.0, "replace")
THROUGHPUT = policy("tokens_per_s", 5000, "scaleOut")


def run(
    policies: list[Policy], m: JobMetrics, last_resize: float | None = None, replicas: int = 2, lo: int = 1, hi: int = 4
) -> PolicyFiring | None:
    return evaluate(policies, m, NOW, last_resize, replicas, lo, hi)


# ---- each metric's direction ------------------------------------------------------------------------------


def test_gpu_util_at_or_above_the_threshold_scales_out() -> None:
    v = run([GPU], with_util(91.2), last_resize=NOW - 300)
    assert v is not None and v.action == "scaleOut" and v.value == pytest.approx(91.2) and v.policy == GPU
    assert v.reason == "gpu_util 91.2% over 60 s >= 75% (cooldown 300 s passed): scaleOut"
    assert run([GPU], with_util(75.0)) is not None
    assert run([GPU], with_util(74.9)) is None


def test_scaling_policies_as_written_in_a_training_v1_manifest() -> None:
    spec = parse_manifest(
        "apiVersion: training.myolo.ai/v1\nkind: ElasticJob\nspec:\n  minReplicas: 1\n  maxReplicas: 4\n"
        "  trainer: {data: {globalBatch: 12}}\n  scalingPolicy:\n"
        "    - {metric: gpu_util, threshold: 75%, cooldown: 300s}\n"
        "    - {metric: gradient_staleness, threshold: 10, action: scaleIn}\n"
    )
    out = evaluate(spec.policies, with_util(80.0), NOW, None, 2, spec.min_replicas, spec.max_replicas)
    assert out is not None and out.action == "scaleOut" and out.policy.metric == "gpu_util"
    stale = evaluate(spec.policies, with_progress(staleness=12), NOW, None, 2, spec.min_replicas, spec.max_replicas)
    assert stale is not None and stale.action == "scaleIn" and stale.value == 12.0


def test_gradient_staleness_above_the_threshold_scales_in() -> None:
    v = run([STALE], with_progress(staleness=12))
    assert v is not None and v.action == "scaleIn" and v.value == 12.0
    assert v.reason == "gradient_staleness 12 over 60 s >= 10 (cooldown 300 s: no resize yet): scaleIn"
    assert run([STALE], with_progress(staleness=9)) is None


def test_step_time_above_the_threshold_asks_for_a_replacement() -> None:
    v = run([SLOW], with_progress(step_time=2.5))
    assert v is not None and v.action == "replace" and v.value == 2.5
    assert v.reason.startswith("step_time 2.5 s over 60 s >= 2 s")
    assert run([SLOW], with_progress(step_time=1.5)) is None


def test_replace_is_not_held_back_by_the_replica_bounds() -> None:
    m = with_progress(step_time=2.5)
    assert run([SLOW], m, replicas=1, lo=1, hi=1) is not None


def test_low_throughput_scales_out_and_high_does_not() -> None:
    v = run([THROUGHPUT], with_progress(tokens=4000.0))
    assert v is not None and v.action == "scaleOut" and v.value == 4000.0
    assert v.reason.startswith("tokens_per_s 4000 tokens/s over 60 s <= 5000 tokens/s")
    assert run([THROUGHPUT], with_progress(tokens=5000.0)) is not None
    assert run([THROUGHPUT], with_progress(tokens=6000.0)) is None


def test_a_policy_names_its_own_action() -> None:
    v = run([policy("gpu_util", 75, "scaleIn")], with_util(90.0))
    assert v is not None and v.action == "scaleIn"


# ---- windows, cooldown, bounds, order ---------------------------------------------------------------------


def test_a_fresh_generation_is_not_judged_before_half_its_window() -> None:
    assert run([GPU], with_util(99.0, seconds=29)) is None
    assert run([GPU], with_util(99.0, seconds=30)) is not None
    assert run([policy("gpu_util", 75, "scaleOut", window_s=600)], with_util(99.0, seconds=60)) is None


def test_the_cooldown_since_the_last_resize() -> None:
    m = with_util(90.0)
    assert run([GPU], m, last_resize=NOW - 299.9) is None
    assert run([GPU], m, last_resize=NOW - 300) is not None
    assert run([GPU], m, last_resize=None) is not None
    short = policy("gpu_util", 75, "scaleOut", cooldown_s=60)
    assert run([short], m, last_resize=NOW - 60) is not None


def test_scale_out_stops_at_max_replicas_and_scale_in_at_min() -> None:
    assert run([GPU], with_util(90.0), replicas=4, hi=4) is None
    assert run([GPU], with_util(90.0), replicas=3, hi=4) is not None
    assert run([STALE], with_progress(staleness=12), replicas=1, lo=1) is None
    assert run([STALE], with_progress(staleness=12), replicas=2, lo=1) is not None


def test_the_first_policy_that_fires_wins_in_the_manifests_order() -> None:
    m = with_progress(staleness=12, tokens=100.0)
    first = run([STALE, THROUGHPUT], m)
    assert first is not None and first.policy == STALE
    other = run([THROUGHPUT, STALE], m)
    assert other is not None and other.policy == THROUGHPUT


def test_a_policy_held_back_lets_the_next_one_try() -> None:
    m = with_progress(staleness=12, tokens=100.0)
    v = run([STALE, THROUGHPUT], m, replicas=1, lo=1, hi=4)  # cannot scale in below 1 replica
    assert v is not None and v.policy == THROUGHPUT
    cooling = policy("gradient_staleness", 10, "scaleIn", cooldown_s=600)
    v = run([cooling, THROUGHPUT], m, last_resize=NOW - 400)
    assert v is not None and v.policy == THROUGHPUT


def test_no_policies_or_no_data_decide_nothing() -> None:
    assert run([], with_util(99.0)) is None
    assert run([GPU, STALE, SLOW, THROUGHPUT], JobMetrics()) is None


def test_the_verdict_records_every_metric_over_its_window() -> None:
    m = with_progress(step_time=2.5, tokens=4000.0, staleness=3)
    v = run([SLOW], m, replicas=3)
    assert v is not None
    assert v.metrics == {
        "step_time": 2.5,
        "tokens_per_s": 4000.0,
        "gradient_staleness": 3.0,
        "threshold": 2.0,
        "window_s": 60.0,
        "replicas": 3.0,
    }


def test_numbers_in_sentences() -> None:
    assert [fmt(x) for x in (75.0, 91.25, 0.0523, 45000.0, 12.345)] == ["75", "91.2", "0.0523", "45000", "12.3"]
    assert fmt(float("inf")) == "inf"


# ---- stragglers -------------------------------------------------------------------------------------------


def replicas(*step_times: float, nodes: tuple[str | None, ...] = ()) -> JobMetrics:
    m = JobMetrics()
    for rank, st in enumerate(step_times):
        with_progress(m=m, dp_rank=rank, step_time=st, node=nodes[rank] if nodes else None)
    return m


def test_a_replica_over_twice_the_others_median_is_a_straggler() -> None:
    s = straggler(replicas(1.0, 1.0, 2.5, 1.2, nodes=("n0", "n1", "n2", "n3")), NOW, 60)
    assert s is not None
    assert (s.dp_rank, s.node_id, s.step_time_s, s.median_others_s, s.ratio) == (2, "n2", 2.5, 1.0, 2.5)
    assert s.reason == "replica 2 on n2: step_time 2.5 s over 60 s is 2.5x the median of the others (1 s) > 2x"
    assert s.metrics["ratio"] == 2.5 and s.metrics["dp_rank"] == 2.0


def test_exactly_twice_the_median_is_not_a_straggler() -> None:
    assert straggler(replicas(1.0, 1.0, 2.0), NOW, 60) is None


def test_two_replicas_compare_with_each_other() -> None:
    """The median of the others, not of all: with two replicas the median of all could never be doubled."""
    s = straggler(replicas(1.0, 2.1), NOW, 60)
    assert s is not None and s.dp_rank == 1 and s.node_id is None and s.median_others_s == 1.0


def test_one_replica_has_no_one_to_be_slower_than() -> None:
    assert straggler(replicas(9.0), NOW, 60) is None
    assert straggler(replicas(9.0), NOW, 60, min_replicas_to_compare=1) is None


def test_fewer_replicas_than_asked_to_compare() -> None:
    assert straggler(replicas(1.0, 3.0), NOW, 60, min_replicas_to_compare=3) is None
    assert straggler(replicas(1.0, 1.0, 3.0), NOW, 60, min_replicas_to_compare=3) is not None


def test_the_factor_is_the_callers() -> None:
    assert straggler(replicas(1.0, 1.0, 1.6), NOW, 60, factor=1.5) is not None
    assert straggler(replicas(1.0, 1.0, 1.6), NOW, 60) is None


def test_the_slowest_straggler_by_ratio_is_named() -> None:
    s = straggler(replicas(1.0, 3.0, 1.0, 5.0, 1.0), NOW, 60)
    assert s is not None and s.dp_rank == 3 and s.ratio == 5.0


def test_a_replica_without_enough_readings_is_not_compared() -> None:
    m = replicas(1.0, 1.0)
    m.add_progress(progress(dp_rank=2, step_time=9.0), NOW)  # one reading: not judged
    assert straggler(m, NOW, 60) is None
    assert straggler(replicas(1.0, 1.0, 3.0), NOW, window_s=600) is None  # 60 s of a 600 s window


def test_replicas_that_take_no_time_are_no_yardstick() -> None:
    assert straggler(replicas(0.0, 0.0, 1.0), NOW, 60) is None


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_the_straggler_is_found_wherever_it_is(rank: int) -> None:
    times = [1.0, 1.0, 1.0]
    times[rank] = 4.0
    s = straggler(replicas(*times), NOW, 60)
    assert s is not None and s.dp_rank == rank
