"""References: bounded, exact where they can be, and hostile summaries refused with the feature named."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
import scipy.stats

from myolo.coordinator.drift.reference import (
    CategoricalReference,
    Categories,
    Histogram,
    NumericReference,
    ReferenceLearner,
    SummaryError,
    Values,
    categorical_reference,
    histogram_reference,
    numeric_reference,
    parse_summary,
)
from myolo.events.payloads.external import MAX_VALUES, FeatureSummary


def test_a_small_reference_keeps_the_data_itself() -> None:
    data = np.random.default_rng(0).normal(2, 3, 500)
    ref = numeric_reference("x", data)
    assert ref.values == sorted(data.tolist()) and ref.count == 500
    assert ref.mean == pytest.approx(data.mean()) and ref.std == pytest.approx(data.std())
    assert len(ref.psi_cuts) == 9 and sum(ref.psi_shares) == pytest.approx(1.0)
    assert all(s == pytest.approx(0.1) for s in ref.psi_shares)  # decile bins of its own data


def test_a_large_reference_keeps_evenly_spaced_quantiles_within_1_over_k_of_the_data() -> None:
    data = np.random.default_rng(1).standard_normal(100_000)
    ref = numeric_reference("x", data)
    assert len(ref.values) == 1000 and ref.count == 100_000
    assert scipy.stats.ks_2samp(ref.values, data).statistic <= 1 / 1000
    encoded = msgspec.json.encode(ref)
    assert len(encoded) < 30_000  # one feature's Kafka record: well under 100 KB
    assert msgspec.json.decode(encoded, type=NumericReference) == ref


def test_a_decoded_reference_is_checked() -> None:
    good = msgspec.to_builtins(numeric_reference("x", [3.0, 1.0, 2.0]))
    with pytest.raises(msgspec.ValidationError, match="must be sorted"):
        msgspec.convert(good | {"values": [3.0, 1.0, 2.0]}, NumericReference)
    with pytest.raises(msgspec.ValidationError, match="psi_shares"):
        msgspec.convert(good | {"psi_shares": [1.0]}, NumericReference)
    with pytest.raises(msgspec.ValidationError, match=r"\$.values"):
        msgspec.convert(good | {"values": [0.0] * 2001}, NumericReference)


def test_non_finite_values_are_refused_naming_the_feature_and_the_place() -> None:
    with pytest.raises(SummaryError, match=r"feature 'latency': values\[2\] is nan \(2 not finite\)"):
        numeric_reference("latency", [1.0, 2.0, float("nan"), float("inf")])
    with pytest.raises(SummaryError, match="feature 'x': no values"):
        numeric_reference("x", [])
    with pytest.raises(ValueError, match="max_values: 5000"):
        numeric_reference("x", [1.0], max_values=5000)


def test_a_histogram_reference_spreads_each_bin_evenly() -> None:
    ref = histogram_reference("x", Histogram(np.array([0.0, 1.0, 2.0]), np.array([1, 3])))
    # four values: quantiles 1/8, 3/8, 5/8, 7/8 of the piecewise-linear CDF
    assert ref.values == pytest.approx([0.5, 1 + 1 / 6, 1.5, 1 + 5 / 6])
    assert ref.count == 4 and ref.mean == pytest.approx((0.5 + 3 * 1.5) / 4)
    second = (1 * (1 / 3) + 3 * (7 / 3)) / 4  # E[x^2] of uniforms on [0,1] and [1,2]
    assert ref.std == pytest.approx(np.sqrt(second - 1.25**2))
    assert sum(ref.psi_shares) == pytest.approx(1.0)


def test_a_categorical_reference_keeps_the_most_frequent_and_pools_the_rest() -> None:
    counts = {f"c{i:04d}": 2000 - i for i in range(1500)}
    ref = categorical_reference("country", counts)
    assert len(ref.counts) == 1000 and "c0000" in ref.counts and "c1499" not in ref.counts
    assert ref.other == sum(2000 - i for i in range(1000, 1500)) and ref.count == sum(counts.values())


def test_a_hostile_categorical_reference_stays_under_100_kb() -> None:
    counts = {f"{i:04d}" + "\x01" * 252: 1 for i in range(1000)}  # control characters: 6 JSON bytes each
    ref = categorical_reference("x", counts)
    encoded = msgspec.json.encode(ref)
    assert len(encoded) < 100_000 and ref.count == 1000 and ref.other > 0
    assert msgspec.json.decode(encoded, type=CategoricalReference) == ref


def test_categorical_reference_errors() -> None:
    with pytest.raises(SummaryError, match=r"feature 'x': categories\['a'\] = -1"):
        categorical_reference("x", {"a": -1})
    with pytest.raises(SummaryError, match="feature 'x': no category has a count"):
        categorical_reference("x", {"a": 0})


# ---- summaries ---------------------------------------------------------------------------------------------


def test_parse_summary_gives_the_three_kinds() -> None:
    v = parse_summary("x", FeatureSummary(values=[1.0, 2.0]))
    assert isinstance(v, Values) and v.values.tolist() == [1.0, 2.0] and v.count == 2
    h = parse_summary("x", FeatureSummary(bin_edges=[0.0, 1.0, 2.0], counts=[3, 4]))
    assert isinstance(h, Histogram) and h.counts.tolist() == [3, 4] and h.count == 7
    c = parse_summary("x", FeatureSummary(categories={"a": 2, "b": 0}))
    assert isinstance(c, Categories) and c.counts == {"a": 2} and c.count == 2


@pytest.mark.parametrize(
    ("summary", "message"),
    [
        (FeatureSummary(values=[0.0, float("nan")]), r"values\[1\] is nan"),
        (FeatureSummary(values=[float("-inf")]), r"values\[0\] is -inf"),
        (FeatureSummary(bin_edges=[0.0, 1.0, 2.0], counts=[1]), r"1 counts for 3 bin_edges; .*len\(bin_edges\) - 1"),
        (FeatureSummary(bin_edges=[0.0, 1.0], counts=[1, 2, 3]), "3 counts for 2 bin_edges"),
        (FeatureSummary(bin_edges=[0.0, 1.0, 1.0], counts=[1, 2]), r"increase strictly; bin_edges\[2\]"),
        (FeatureSummary(bin_edges=[0.0, float("nan")], counts=[1]), r"bin_edges\[1\] is nan"),
        (FeatureSummary(bin_edges=[0.0, 1.0], counts=[-1]), "whole numbers >= 0"),
        (FeatureSummary(bin_edges=[0.0, 1.0]), "counts is missing"),
        (FeatureSummary(values=[1.0], categories={"a": 1}), "has values and categories; give exactly one"),
        (FeatureSummary(), "has nothing"),
        (FeatureSummary(values=[0.0] * (MAX_VALUES + 1)), "100001 values, over 100000 in one summary"),
        (FeatureSummary(categories={"a" * 300: 1}), "at most 256 characters"),
        (FeatureSummary(categories={"a": -2}), r"categories\['a'\] = -2"),
    ],
)
def test_hostile_summaries_are_refused_with_the_feature_named(summary: FeatureSummary, message: str) -> None:
    with pytest.raises(SummaryError, match=rf"feature 'f7': .*{message}"):
        parse_summary("f7", summary)


def test_the_largest_summary_allowed_is_taken() -> None:
    v = parse_summary("x", FeatureSummary(values=np.random.default_rng(2).standard_normal(MAX_VALUES).tolist()))
    assert isinstance(v, Values) and v.count == MAX_VALUES


# ---- learning ------------------------------------------------------------------------------------------------


def test_the_learner_freezes_on_exactly_the_first_n_values() -> None:
    data = np.random.default_rng(3).standard_normal(130)
    learner = ReferenceLearner("x", target=100, max_values=10)
    for chunk in np.split(data, [40, 80, 120]):
        learner.add(Values(chunk, chunk.size))
    assert learner.ready and learner.seen == 100
    assert learner.reference == numeric_reference("x", data[:100], max_values=10)
    learner.add(Values(np.array([1e9]), 1))  # frozen: later traffic does not move it
    assert learner.reference == numeric_reference("x", data[:100], max_values=10)


def test_the_learner_sums_histograms_and_refuses_other_edges_or_kinds() -> None:
    learner = ReferenceLearner("x", target=10)
    edges = np.array([0.0, 1.0, 2.0])
    learner.add(Histogram(edges, np.array([2, 2])))
    with pytest.raises(SummaryError, match=r"feature 'x': bin_edges differ .*bin_edges\[1\] = 1.5, .* has 1.0"):
        learner.add(Histogram(np.array([0.0, 1.5, 2.0]), np.array([1, 1])))
    with pytest.raises(SummaryError, match="feature 'x': values after a histogram"):
        learner.add(Values(np.array([1.0]), 1))
    assert not learner.ready
    learner.add(Histogram(edges, np.array([3, 3])))
    assert learner.ready and isinstance(learner.reference, NumericReference) and learner.reference.count == 10


def test_the_learner_of_categories() -> None:
    learner = ReferenceLearner("x", target=5)
    learner.add(Categories({"a": 2, "b": 1}))
    learner.add(Categories({"a": 2, "c": 1}, other=1))
    ref = learner.reference
    assert isinstance(ref, CategoricalReference) and ref.counts == {"a": 4, "b": 1, "c": 1} and ref.other == 1
