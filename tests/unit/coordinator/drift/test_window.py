"""The sliding window in simulated time: buckets leave it one at a time, memory stays bounded, samples are
uniform over the window and deterministic, and data of another shape is refused until the window empties."""

from __future__ import annotations

import numpy as np
import pytest

from myolo.coordinator.drift.reference import Categories, Histogram, SummaryError, Values
from myolo.coordinator.drift.window import FeatureWindow

T0 = 1_767_225_600.0  # a multiple of the 600 s buckets


def values(*v: float) -> Values:
    return Values(np.asarray(v, dtype=float), len(v))


def window(**kw) -> FeatureWindow:
    return FeatureWindow("x", kw.pop("window_s", 3600.0), kw.pop("buckets", 6), **kw)


def test_buckets_leave_the_window_one_at_a_time() -> None:
    w = window()
    for i in range(6):  # one value in each 10-minute bucket of the first hour
        w.add(values(float(i)), T0 + i * 600 + 1)
    assert w.count(T0 + 3599) == 6
    assert w.count(T0 + 3600) == 6  # the first bucket started exactly an hour ago: still in
    assert w.count(T0 + 3601) == 5  # now it started more than an hour ago
    snap = w.snapshot(T0 + 4200.5)
    assert isinstance(snap, Values) and sorted(snap.values.tolist()) == [2.0, 3.0, 4.0, 5.0]
    assert w.snapshot(T0 + 7200.5) is None and w.kind is None


def test_a_window_covers_at_least_window_s_minus_a_bucket() -> None:
    w = window()
    w.add(values(1.0), T0 + 599)  # late in the first bucket
    assert w.count(T0 + 599 + 3000) == 1  # 50 min later, still there
    assert w.count(T0 + 3600.001) == 0  # its bucket started over an hour ago


def test_a_bucket_keeps_a_bounded_deterministic_sample_of_its_values() -> None:
    data = np.random.default_rng(0).standard_normal(100_000)
    a, b = window(max_bucket_values=500, seed=7), window(max_bucket_values=500, seed=7)
    for w in (a, b):
        for chunk in np.split(data, 10):
            w.add(Values(chunk, chunk.size), T0 + 10)
    sa, sb = a.snapshot(T0 + 20), b.snapshot(T0 + 20)
    assert isinstance(sa, Values) and isinstance(sb, Values)
    assert sa.count == 100_000 and sa.values.size == 500
    assert np.array_equal(sa.values, sb.values)  # same seed, same traffic: same sample
    assert np.isin(sa.values, data).all()
    other = window(max_bucket_values=500, seed=8)
    other.add(Values(data, data.size), T0 + 10)
    snap = other.snapshot(T0 + 20)
    assert isinstance(snap, Values) and not np.array_equal(np.sort(snap.values), np.sort(sa.values))


def test_the_sample_of_a_window_is_uniform_over_buckets_of_unequal_traffic() -> None:
    # 9,000 zeros in a busy bucket, 1,000 ones in a quiet one; each keeps at most 500 values
    w = window(max_bucket_values=500, seed=1)
    w.add(Values(np.zeros(9000), 9000), T0 + 10)
    w.add(Values(np.ones(1000), 1000), T0 + 610)
    snap = w.snapshot(T0 + 620)
    assert isinstance(snap, Values) and snap.count == 10_000
    share = snap.values.mean()
    assert 0.05 < share < 0.2  # the ones are 10 % of the window; pooling the two reservoirs would give 50 %


def test_a_histogram_window_sums_counts_and_refuses_other_edges_until_it_has_emptied() -> None:
    w = window()
    edges = np.array([0.0, 1.0, 2.0])
    w.add(Histogram(edges, np.array([1, 2])), T0 + 10)
    w.add(Histogram(edges.copy(), np.array([3, 4])), T0 + 700)
    snap = w.snapshot(T0 + 800)
    assert isinstance(snap, Histogram) and snap.counts.tolist() == [4, 6]
    with pytest.raises(
        SummaryError,
        match=r"feature 'x': bin_edges differ from those of the window \(bin_edges\[1\] = 1.5, the window has 1.0\)",
    ):
        w.add(Histogram(np.array([0.0, 1.5, 2.0]), np.array([1, 1])), T0 + 900)
    with pytest.raises(SummaryError, match="4 edges, the window has 3"):
        w.add(Histogram(np.array([0.0, 1.0, 2.0, 3.0]), np.array([1, 1, 1])), T0 + 900)
    assert w.count(T0 + 900) == 10  # nothing of the refused ones went in
    w.add(Histogram(np.array([0.0, 1.5, 2.0]), np.array([5, 5])), T0 + 700 + 3601)  # the old counts have left
    snap = w.snapshot(T0 + 700 + 3601)
    assert isinstance(snap, Histogram) and snap.edges.tolist() == [0.0, 1.5, 2.0] and snap.counts.tolist() == [5, 5]


def test_a_window_keeps_one_kind_while_it_holds_data() -> None:
    w = window()
    w.add(values(1.0), T0)
    with pytest.raises(SummaryError, match="feature 'x': categories while the window holds values"):
        w.add(Categories({"a": 1}), T0 + 1)
    w.add(Categories({"a": 1}), T0 + 3601)
    assert isinstance(w.snapshot(T0 + 3601), Categories)


def test_category_counts_are_summed_and_bounded_in_names() -> None:
    w = window()
    w.add(Categories({"a": 2, "b": 1}), T0 + 10)
    w.add(Categories({"a": 1}, other=3), T0 + 610)
    snap = w.snapshot(T0 + 620)
    assert isinstance(snap, Categories) and snap.counts == {"a": 3, "b": 1} and snap.other == 3
    w.add(Categories({f"n{i}": 1 for i in range(1000)}), T0 + 1210)  # 1,002 names: two past the bound
    snap = w.snapshot(T0 + 1220)
    assert isinstance(snap, Categories) and len(snap.counts) == 1000 and snap.other == 3 + 2
    assert snap.count == 4 + 3 + 1000
    w.snapshot(T0 + 600 + 3601)  # a and b have left with their buckets: room for new names again
    w.add(Categories({"late": 4}), T0 + 600 + 3601)
    snap = w.snapshot(T0 + 600 + 3601)
    assert isinstance(snap, Categories) and snap.counts["late"] == 4


def test_empty_data_changes_nothing_and_bad_arguments_are_named() -> None:
    w = window()
    w.add(Values(np.empty(0), 0), T0)
    assert w.kind is None and w.snapshot(T0) is None
    with pytest.raises(ValueError, match="window_s: 0"):
        FeatureWindow("x", 0.0)
    with pytest.raises(ValueError, match="buckets: 0"):
        FeatureWindow("x", 60.0, 0)


def test_a_clock_that_goes_back_never_leaves_more_buckets_than_the_window_has() -> None:
    w = window()
    w.add(values(1.0), T0 + 36_000)
    for i in range(20):
        w.add(values(2.0), T0 + i * 600)  # older than the future bucket, each in its own bucket
    assert len(w._buckets) <= 7  # the bound itself: six buckets and the one being filled
