"""Each statistic against scipy.stats, or against the same sum worked out by hand in the test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from myolo.coordinator.drift import stats

ROOT = Path(__file__).resolve().parents[4]


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# ---- PSI -----------------------------------------------------------------------------------------------


def test_psi_is_the_sum_over_bins_by_hand() -> None:
    reference, window = np.array([10, 20, 30, 40]), np.array([20, 20, 20, 40])
    r, c = reference / 100, window / 100
    by_hand = sum((ci - ri) * np.log(ci / ri) for ri, ci in zip(r, c, strict=True))
    assert stats.psi(reference, window) == pytest.approx(by_hand, rel=1e-12)
    assert stats.psi(reference, reference) == 0.0


def test_an_empty_bin_gets_epsilon_and_psi_stays_finite() -> None:
    reference, window = np.array([50, 50]), np.array([0, 100])
    r = np.array([0.5, 0.5])
    c = np.array([stats.PSI_EPSILON, 1.0])
    c /= c.sum()
    by_hand = float(np.sum((c - r) * np.log(c / r)))
    assert stats.psi(reference, window) == pytest.approx(by_hand, rel=1e-12)
    assert stats.psi(reference, window) > stats.PSI_MAJOR  # a bin emptied is a major shift


def test_psi_refuses_bins_that_do_not_match() -> None:
    with pytest.raises(ValueError, match="window: 3 bins, the reference has 2"):
        stats.psi(np.array([1, 1]), np.array([1, 1, 1]))
    with pytest.raises(ValueError, match="window: counts sum to 0"):
        stats.psi(np.array([1, 1]), np.array([0, 0]))


def test_quantile_cuts_are_the_deciles_and_ties_collapse() -> None:
    values = np.arange(1000.0)
    assert np.allclose(stats.quantile_cuts(values), np.quantile(values, np.arange(1, 10) / 10))
    assert stats.quantile_cuts(np.array([1.0] * 50 + [2.0] * 50)).tolist() == [1.0, 1.5, 2.0]
    with pytest.raises(ValueError, match="bins: 1 < 2"):
        stats.quantile_cuts(values, bins=1)


def test_bin_counts_use_half_open_bins_and_open_outer_bins() -> None:
    cuts = np.array([0.0, 1.0])
    assert stats.bin_counts(np.array([-5.0, 0.0, 0.5, 1.0, 99.0]), cuts).tolist() == [1, 2, 2]


def test_a_histogram_moves_onto_psi_bins_as_if_spread_evenly_in_each_bin() -> None:
    edges, counts = np.array([0.0, 2.0, 4.0]), np.array([10, 30])
    # cut at 1 takes half of the first bin; cut at 3 half of the second
    assert stats.histogram_bin_counts(edges, counts, np.array([1.0, 3.0])).tolist() == [5.0, 20.0, 15.0]
    # cuts outside the histogram: everything in the bin between them
    assert stats.histogram_bin_counts(edges, counts, np.array([-1.0, 9.0])).tolist() == [0.0, 40.0, 0.0]


# ---- Kolmogorov–Smirnov ----------------------------------------------------------------------------------


def test_ks_of_raw_values_is_scipys_two_sample_test() -> None:
    a, b = rng(1).normal(0, 1, 400), rng(2).normal(0.3, 1, 500)
    expected = scipy.stats.ks_2samp(a, b)
    got = stats.ks(a, b)
    assert got.statistic == expected.statistic and got.p_value == expected.pvalue


def test_ks_against_a_summary_uses_the_references_true_count_for_the_p_value() -> None:
    a, b = rng(1).normal(0, 1, 1000), rng(2).normal(0.1, 1, 1000)
    d = scipy.stats.ks_2samp(a, b).statistic
    got = stats.ks(a, b, reference_count=5000)
    assert got.statistic == pytest.approx(d, abs=1e-12)  # scipy rounds its two paths apart by an ulp
    assert got.p_value == pytest.approx(scipy.stats.kstwo.sf(d, round(1000 * 5000 / 6000)), rel=1e-12)
    assert got.p_value < stats.ks(a, b).p_value  # a reference 5x larger knows its CDF better


def test_ks_of_a_histogram_is_a_lower_bound_on_the_raw_statistic_and_close_with_fine_bins() -> None:
    raw, reference = rng(3).normal(0.4, 1, 5000), np.sort(rng(4).normal(0, 1, 1000))
    d_raw = scipy.stats.ks_2samp(raw, reference).statistic
    for bins in (5, 20, 100):
        edges = np.linspace(raw.min(), raw.max(), bins + 1)
        counts, _ = np.histogram(raw, edges)
        got = stats.ks_histogram(edges, counts, reference)
        assert got.statistic <= d_raw + 1e-12
        assert got.p_value == pytest.approx(stats.ks_p_value(got.statistic, 5000, 1000), rel=1e-12)
    edges = np.quantile(np.concatenate([raw, reference]), np.linspace(0, 1, 3001))  # about a value per bin
    counts, _ = np.histogram(raw, edges)
    assert stats.ks_histogram(edges, counts, reference).statistic == pytest.approx(d_raw, abs=0.005)


def test_ks_histogram_of_the_reference_itself_is_zero_at_its_edges() -> None:
    reference = np.arange(100.0)
    edges = np.array([-0.5, 24.5, 49.5, 99.5])
    counts, _ = np.histogram(reference, edges)
    assert stats.ks_histogram(edges, counts, reference).statistic == 0.0


# ---- Wasserstein -----------------------------------------------------------------------------------------


def test_wasserstein_is_scipys_over_the_reference_std() -> None:
    a, b = rng(5).normal(0, 2, 300), rng(6).normal(1, 2, 700)
    assert stats.wasserstein(a, b, 2.0) == pytest.approx(scipy.stats.wasserstein_distance(a, b) / 2.0, rel=1e-12)


def test_wasserstein_of_a_shift_is_the_shift_in_reference_stds() -> None:
    reference = rng(7).normal(0, 3, 1000)
    assert stats.wasserstein(reference + 1.5, reference, 3.0) == pytest.approx(0.5, rel=1e-12)
    assert stats.wasserstein(reference + 1.5, reference, 0.0) == pytest.approx(1.5, rel=1e-12)  # no spread: units


def test_wasserstein_of_a_histogram_places_counts_at_bin_midpoints() -> None:
    reference = rng(8).normal(0, 1, 1000)
    edges, counts = np.array([-1.0, 0.0, 1.0, 3.0]), np.array([5, 10, 5])
    by_scipy = scipy.stats.wasserstein_distance([-0.5, 0.5, 2.0], reference, u_weights=[5, 10, 5])
    assert stats.wasserstein_histogram(edges, counts, reference, 1.0) == pytest.approx(by_scipy, rel=1e-12)
    # one bin around a point mass: its midpoint is where the mass is
    point = np.full(50, 0.25)
    assert stats.wasserstein_histogram(np.array([0.0, 0.5]), np.array([7]), point, 1.0) == pytest.approx(0.0)


# ---- categorical -----------------------------------------------------------------------------------------


def test_chi_square_by_hand_and_against_scipy() -> None:
    observed, reference = np.array([30.0, 50.0, 20.0]), np.array([200.0, 200.0, 100.0])
    expected = np.array([40.0, 40.0, 20.0])  # the reference's shares times the window's 100
    by_hand = float(np.sum((observed - expected) ** 2 / expected))
    got = stats.chi_square(observed, reference)
    assert got.statistic == pytest.approx(by_hand, rel=1e-12)
    assert got.p_value == pytest.approx(scipy.stats.chi2.sf(by_hand, df=2), rel=1e-12)
    assert got.p_value == pytest.approx(scipy.stats.chisquare(observed, expected).pvalue, rel=1e-12)


def test_chi_square_gives_an_unseen_cell_epsilon_expected_values() -> None:
    window, reference = {"a": 45, "b": 45, "new": 10}, {"a": 500, "b": 500}
    observed, expected_counts = stats.align_categories(window, reference)
    assert observed.tolist() == [45, 45, 10] and expected_counts.tolist() == [500, 500, 0]
    expected = np.array([50.0, 50.0, stats.CHI2_EPSILON])
    expected *= 100 / expected.sum()
    by_hand = float(np.sum((observed - expected) ** 2 / expected))
    got = stats.chi_square(observed, expected_counts)
    assert np.isfinite(got.statistic) and got.statistic == pytest.approx(by_hand, rel=1e-12)
    assert got.p_value < 1e-6  # 10 % of traffic in a category never seen


def test_align_categories_pools_what_the_reference_never_saw() -> None:
    observed, expected = stats.align_categories(
        {"a": 1, "x": 2, "y": 3}, {"a": 5, "b": 6}, window_other=4, reference_other=7
    )
    assert observed.tolist() == [1, 0, 9] and expected.tolist() == [5, 6, 7]
    observed, expected = stats.align_categories({"a": 1}, {"a": 5, "b": 6})
    assert observed.tolist() == [1, 0] and expected.tolist() == [5, 6]  # no other cell when both sides lack one


def test_js_distance_base_2_by_hand() -> None:
    p, q = np.array([0.5, 0.5]), np.array([1.0, 0.0])
    m = (p + q) / 2
    kl_p = sum(pi * np.log2(pi / mi) for pi, mi in zip(p, m, strict=True) if pi > 0)
    kl_q = sum(qi * np.log2(qi / mi) for qi, mi in zip(q, m, strict=True) if qi > 0)
    by_hand = np.sqrt((kl_p + kl_q) / 2)
    assert stats.js_distance(np.array([50, 50]), np.array([10, 0])) == pytest.approx(by_hand, rel=1e-12)
    assert stats.js_distance(np.array([1, 0]), np.array([0, 1])) == pytest.approx(1.0)
    assert stats.js_distance(np.array([3, 7]), np.array([30, 70])) == pytest.approx(0.0, abs=1e-7)


# ---- across features -------------------------------------------------------------------------------------


def test_corrections_by_hand() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.5])
    assert stats.adjust(p, "bonferroni").tolist() == pytest.approx([0.04, 0.16, 0.12, 1.0])
    # Benjamini–Hochberg: p * m / rank, then the running minimum from the largest p down
    assert stats.adjust(p, "fdr_bh").tolist() == pytest.approx([0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.5])
    assert stats.adjust(p, "none").tolist() == p.tolist()
    assert stats.adjust(np.array([]), "bonferroni").size == 0
    with pytest.raises(ValueError, match="correction: 'holm'"):
        stats.adjust(p, "holm")  # type: ignore[arg-type]


def test_importing_the_drift_core_leaves_scipy_unloaded_until_a_statistic_is_computed() -> None:
    """scipy.stats costs tens of MiB resident: a coordinator that evaluates no drift must not pay for it."""
    code = (
        "import sys; import myolo.coordinator.drift.monitor, myolo.coordinator.drift.rule; "
        "print('scipy.stats' in sys.modules, 'scipy.spatial' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["False", "False"]
