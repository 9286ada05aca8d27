"""JobMetrics: windowed means of one job generation, the half-coverage rule, how each metric is formed over
replicas and nodes, generation fencing, and memory that stays bounded whatever arrives."""

from __future__ import annotations

import pytest

from myolo.coordinator.jobs.metrics import JobMetrics, Series
from myolo.events.payloads import GpuReading, NodeSample, TrainingProgress


def progress(
    dp_rank: int = 0,
    step_time: float = 1.0,
    tokens: float = 1000.0,
    staleness: int = 0,
    generation: int = 0,
    node: str | None = None,
) -> TrainingProgress:
    return TrainingProgress(
        job_id="j",
        generation=generation,
        rank=dp_rank,
        world_size=4,
        dp_rank=dp_rank,
        step=1,
        loss=2.0,
        tokens_per_s=tokens,
        step_time_s=step_time,
        gradient_staleness=staleness,
        node_id=node,
    )


def sample(node_id: str, utils: dict[int, float | None]) -> NodeSample:
    gpus = [GpuReading(index=i, uuid=f"{node_id}-{i}", name="sim", util_gpu=u) for i, u in utils.items()]
    return NodeSample(node_id=node_id, backend="sim", gpus=gpus)


def feed(m: JobMetrics, times: range | list[float], **kw: object) -> None:
    for t in times:
        assert m.add_progress(progress(**kw), float(t))  # type: ignore[arg-type]


# ---- windows and the half-coverage rule -------------------------------------------------------------------


def test_one_sample_is_not_enough() -> None:
    m = JobMetrics()
    feed(m, [100.0], step_time=1.0)
    assert m.mean("step_time", 60, now=100.0) is None


def test_readings_must_span_half_the_window() -> None:
    m = JobMetrics()
    feed(m, range(0, 30), step_time=2.0)  # t = 0..29: a span of 29 s
    assert m.mean("step_time", 60, now=29.0) is None
    feed(m, [30.0], step_time=2.0)  # the span reaches 30 s, half of 60
    assert m.mean("step_time", 60, now=30.0) == 2.0
    assert m.mean("step_time", 61, now=30.0) is None  # 30 s is less than half of 61
    assert m.mean("step_time", 20, now=30.0) == 2.0


def test_readings_that_stopped_long_ago_leave_the_window_empty() -> None:
    m = JobMetrics()
    feed(m, range(0, 60), step_time=1.0)
    assert m.mean("step_time", 60, now=59.0) == 1.0
    assert m.mean("step_time", 60, now=89.0) == 1.0  # t = 29..59 still span 30 s, half the window
    assert m.mean("step_time", 60, now=90.0) is None  # t = 30..59: 29 s, under half
    assert m.mean("step_time", 60, now=200.0) is None  # nothing in the window at all


def test_the_window_keeps_only_its_own_readings() -> None:
    m = JobMetrics()
    feed(m, range(0, 60), step_time=1.0)
    feed(m, range(60, 120), step_time=3.0)
    assert m.mean("step_time", 60, now=119.5) == 3.0  # starts at 59.5: only t = 60..119
    # the window's start is inclusive: t = 59 (1.0) joins the sixty readings of 3.0
    assert m.mean("step_time", 60, now=119.0) == pytest.approx((1.0 + 60 * 3.0) / 61)
    assert m.mean("step_time", 120, now=119.0) == pytest.approx(2.0)


def test_a_window_of_zero_never_holds_enough() -> None:
    m = JobMetrics()
    feed(m, range(0, 10))
    assert m.mean("step_time", 0, now=9.0) is None
    assert m.mean("step_time", -5, now=9.0) is None


def test_readings_later_than_the_question_are_not_counted() -> None:
    m = JobMetrics()
    feed(m, range(0, 60), step_time=1.0)
    feed(m, range(60, 120), step_time=5.0)
    assert m.mean("step_time", 60, now=59.0) == 1.0


def test_an_out_of_order_reading_counts_as_arriving_with_the_newest() -> None:
    m = JobMetrics()
    feed(m, [10.0, 20.0], step_time=1.0)
    feed(m, [5.0], step_time=4.0)  # older than t = 20: taken as t = 20, still in the series
    assert m.mean("step_time", 20, now=20.0) == 2.0


def test_readings_within_the_resolution_share_a_bucket() -> None:
    s = Series(horizon_s=100, resolution_s=1.0)
    for i in range(10):
        s.add(i * 0.1, float(i))  # t = 0.0 .. 0.9: one bucket
    assert len(s) == 1
    s.add(1.0, 10.0)
    assert len(s) == 2
    w = s.window(10, now=1.0)
    assert w is not None and w.samples == 11 and w.mean == 5.0 and w.span_s == 1.0


def test_series_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="resolution_s"):
        Series(horizon_s=10, resolution_s=0)
    with pytest.raises(ValueError, match="horizon_s"):
        JobMetrics(horizon_s=1, resolution_s=2)


# ---- each metric over replicas and nodes ------------------------------------------------------------------


def test_step_time_is_the_mean_over_replicas_each_averaged_on_its_own() -> None:
    m = JobMetrics()
    feed(m, range(0, 60), dp_rank=0, step_time=1.0)
    feed(m, [t / 4 for t in range(0, 240)], dp_rank=1, step_time=3.0)  # four readings a second
    assert m.mean("step_time", 60, now=59.75) == 2.0
    assert m.replica_step_times(60, now=59.75) == {0: 1.0, 1: 3.0}


def test_tokens_per_s_is_the_mean_of_what_replicas_report() -> None:
    """Each replica reports global batch x seq / its step time: the job's rate already, not its share."""
    m = JobMetrics()
    feed(m, range(0, 60), dp_rank=0, tokens=1000.0)
    feed(m, range(0, 60), dp_rank=1, tokens=3000.0)
    assert m.mean("tokens_per_s", 60, now=59.0) == 2000.0


def test_gradient_staleness_is_the_worst_replica() -> None:
    m = JobMetrics()
    feed(m, range(0, 60), dp_rank=0, staleness=1)
    feed(m, range(0, 60), dp_rank=1, staleness=7)
    feed(m, range(0, 60), dp_rank=2, staleness=3)
    assert m.mean("gradient_staleness", 60, now=59.0) == 7.0


def test_a_replica_without_enough_readings_is_left_out() -> None:
    m = JobMetrics()
    feed(m, range(0, 60), dp_rank=0, step_time=1.0)
    feed(m, [59.0], dp_rank=1, step_time=9.0)
    assert m.mean("step_time", 60, now=59.0) == 1.0
    assert m.replica_step_times(60, now=59.0) == {0: 1.0}


def test_gpu_util_is_the_mean_over_the_jobs_gpus_and_nodes() -> None:
    m = JobMetrics()
    for t in range(0, 60):
        # node a: the job has GPUs 0 and 1; GPU 2 belongs to another job, GPU 3 reports no utilisation
        assert m.add_gpu_util("a", [0, 1, 3], sample("a", {0: 80.0, 1: 100.0, 2: 0.0, 3: None}), float(t))
        assert m.add_gpu_util("b", [0], sample("b", {0: 50.0, 1: 0.0}), float(t))
    assert m.means_by_key("gpu_util", 60, now=59.0) == {"a": 90.0, "b": 50.0}
    assert m.mean("gpu_util", 60, now=59.0) == 70.0


def test_gpu_util_without_a_reading_is_absent_not_zero() -> None:
    m = JobMetrics()
    assert not m.add_gpu_util("a", [0], sample("a", {0: None, 1: 90.0}), 0.0)
    assert not m.add_gpu_util("a", [], sample("a", {0: 90.0}), 0.0)
    assert m.keys("gpu_util") == 0 and m.refused == 0


def test_gpu_util_refuses_a_sample_of_another_node() -> None:
    m = JobMetrics()
    with pytest.raises(ValueError, match="node_id: the sample is from 'b', not 'a'"):
        m.add_gpu_util("a", [0], sample("b", {0: 90.0}), 0.0)


def test_the_node_of_a_replica_is_the_one_its_progress_came_from() -> None:
    m = JobMetrics()
    m.add_progress(progress(dp_rank=0, node="n1"), 0.0)
    m.add_progress(progress(dp_rank=1), 0.0)
    assert m.node_of(0) == "n1"
    assert m.node_of(1) is None
    m.add_progress(progress(dp_rank=0, node="n2"), 1.0)
    assert m.node_of(0) == "n2"


# ---- generations ------------------------------------------------------------------------------------------


def test_progress_of_another_generation_or_rank_is_refused_and_counted() -> None:
    m = JobMetrics(generation=2, replicas=2)
    assert not m.add_progress(progress(generation=1), 0.0)
    assert not m.add_progress(progress(generation=2, dp_rank=2), 0.0)
    assert m.add_progress(progress(generation=2, dp_rank=1), 0.0)
    assert m.refused == 2
    assert m.keys("step_time") == 1


def test_reset_forgets_the_last_generation() -> None:
    m = JobMetrics(generation=1)
    feed(m, range(0, 60), generation=1, node="n1")
    m.add_gpu_util("n1", [0], sample("n1", {0: 90.0}), 59.0)
    m.reset(generation=2, replicas=1)
    assert m.generation == 2 and m.replicas == 1
    assert all(v == 0 for v in m.sizes().values())
    assert m.mean("step_time", 60, now=59.0) is None
    assert m.node_of(0) is None
    assert not m.add_progress(progress(generation=1), 60.0)
    assert m.add_progress(progress(generation=2), 60.0)


# ---- memory -----------------------------------------------------------------------------------------------


def test_a_hundred_thousand_readings_stay_within_the_horizon_bound() -> None:
    m = JobMetrics()  # horizon 3600 s, resolution 1 s: at most 3602 buckets a series
    bound = 3602
    n = 100_000
    for i in range(n):
        t = i * 0.05  # twenty steps a second, per replica, for 5000 s
        m.add_progress(progress(dp_rank=0, step_time=1.0), t)
        m.add_progress(progress(dp_rank=1, step_time=3.0), t)
        if i % 20 == 0:
            m.add_gpu_util("a", [0], sample("a", {0: 60.0}), t)
    sizes = m.sizes()
    assert sizes["step_time"] <= 2 * bound and sizes["tokens_per_s"] <= 2 * bound
    assert sizes["gradient_staleness"] <= 2 * bound and sizes["gpu_util"] <= bound
    now = (n - 1) * 0.05
    # the bound loses no reading of the horizon: the longest window is still fully measured
    assert m.mean("step_time", 3600, now=now) == 2.0
    assert m.mean("gpu_util", 3600, now=now) == 60.0


def test_readings_older_than_the_horizon_are_dropped() -> None:
    m = JobMetrics(horizon_s=10, resolution_s=1)
    for t in range(100_000):
        m.add_progress(progress(), float(t))
    assert m.sizes()["step_time"] <= 12
    assert m.mean("step_time", 10, now=99_999.0) == 1.0
    assert m.mean("step_time", 100, now=99_999.0) is None  # only 10 s are kept: under half of 100


def test_made_up_ranks_and_nodes_are_capped() -> None:
    m = JobMetrics(max_keys=64)
    for rank in range(100_000):
        m.add_progress(progress(dp_rank=rank), 0.0)
    for i in range(1000):
        m.add_gpu_util(f"n{i}", [0], sample(f"n{i}", {0: 50.0}), 0.0)
    assert m.keys("step_time") == m.keys("tokens_per_s") == m.keys("gpu_util") == 64
    assert m.refused == (100_000 - 64) + (1000 - 64)
    assert m.add_progress(progress(dp_rank=3), 1.0)  # a replica already tracked keeps reporting
