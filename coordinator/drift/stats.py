"""The statistics that compare a feature's window with its reference, as plain functions over numpy arrays.

Numeric features: PSI over the reference's quantile bins, the two-sample Kolmogorov–Smirnov test and the
Wasserstein-1 distance over the reference's standard deviation. Categorical features: the chi-square test of
the window's counts against the reference's proportions, and the Jensen–Shannon distance (base 2). A numeric
feature may come as a histogram; its KS and W1 are then computed from the bins (see each function).

Everything here is pure: no clock, no state, no I/O, so each value can be checked against scipy by hand.
scipy is imported where it is used, not with this module: ``scipy.stats`` is tens of MiB resident, which a
coordinator that evaluates no drift should not pay (its ingest path is held to 160 MiB by
tests/unit/coordinator/test_bounded_memory.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NamedTuple

import numpy as np

PSI_BINS = 10
PSI_EPSILON = 1e-4  # the share given to an empty bin, so ln(c/r) stays finite
PSI_MODERATE = 0.1  # the conventional bands: < 0.1 stable, 0.1..0.25 moderate, >= 0.25 major shift
PSI_MAJOR = 0.25
CHI2_EPSILON = 0.5  # expected count of a cell the reference never saw (see ``chi_square``)

Correction = Literal["bonferroni", "fdr_bh", "none"]


class Test(NamedTuple):
    """A test's statistic and its p-value."""

    statistic: float
    p_value: float


# ---- PSI -----------------------------------------------------------------------------------------------


def quantile_cuts(values: np.ndarray, bins: int = PSI_BINS) -> np.ndarray:
    """Inner edges of the PSI bins: the reference's quantiles at 1/bins, 2/bins, ... The outer bins are open
    (``-inf``/``+inf`` are implied, so nothing falls outside and nothing infinite is stored); tied quantiles
    collapse into one edge, so a feature with few distinct values has fewer bins."""
    if bins < 2:
        raise ValueError(f"bins: {bins} < 2; PSI needs at least two bins")
    if len(values) == 0:
        raise ValueError("values: empty; quantile bins need reference data")
    return np.unique(np.quantile(values, np.arange(1, bins) / bins))


def bin_counts(values: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Values per bin of ``cuts`` (bin i holds cuts[i-1] <= v < cuts[i]); len(cuts) + 1 bins."""
    return np.bincount(np.searchsorted(cuts, values, side="right"), minlength=len(cuts) + 1)


def histogram_bin_counts(edges: np.ndarray, counts: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """A histogram's counts moved onto the PSI bins of ``cuts``: its CDF, linear within each of its bins (the
    values are taken as spread evenly in a bin), read at the cuts. Fractional counts; same total."""
    cdf = np.concatenate([[0.0], np.cumsum(counts, dtype=float)])
    at_cuts = np.interp(cuts, edges, cdf)  # 0 below the first edge, the total above the last
    return np.diff(np.concatenate([[0.0], at_cuts, [cdf[-1]]]))


def psi(reference: np.ndarray, window: np.ndarray, epsilon: float = PSI_EPSILON) -> float:
    """Population stability index sum((c - r) * ln(c / r)) over the same bins, from counts or shares of the
    reference (r) and the window (c). An empty bin gets the share ``epsilon`` (then both are renormalised),
    otherwise one empty bin would make PSI infinite."""
    r = _shares(reference, "reference")
    c = _shares(window, "window")
    if r.shape != c.shape:
        raise ValueError(f"window: {c.shape[0]} bins, the reference has {r.shape[0]}; compare the same bins")
    r = np.maximum(r, epsilon)
    c = np.maximum(c, epsilon)
    r, c = r / r.sum(), c / c.sum()
    return float(np.sum((c - r) * np.log(c / r)))


def _shares(counts: np.ndarray, name: str) -> np.ndarray:
    counts = np.asarray(counts, dtype=float)
    total = counts.sum()
    if not total > 0:
        raise ValueError(f"{name}: counts sum to {total}; need at least one value")
    return counts / total


# ---- Kolmogorov–Smirnov ----------------------------------------------------------------------------------


def ks_p_value(d: float, n: int, m: int) -> float:
    """Two-sided p-value of a two-sample KS statistic ``d`` for samples of ``n`` and ``m``: scipy's asymptotic
    one (the one-sample distribution ``kstwo`` at the effective n = n*m/(n+m), as ``ks_2samp`` does)."""
    import scipy.stats

    en = round(n * m / (n + m))
    return float(np.clip(scipy.stats.kstwo.sf(d, max(en, 1)), 0.0, 1.0))


def ks(values: np.ndarray, reference: np.ndarray, reference_count: int | None = None) -> Test:
    """Two-sample KS test of raw ``values`` against the reference's sample (``scipy.stats.ks_2samp``).

    ``reference_count``: how many values the reference was built from when ``reference`` is its quantile
    summary (``NumericReference.values``). The summary's CDF is within 1/len(reference) of the full data's,
    so the statistic is kept and the p-value is the asymptotic one for the true count, not for the summary's
    length (which would understate the reference's precision and the test's power).
    """
    import scipy.stats

    if reference_count is None or reference_count == len(reference):
        r = scipy.stats.ks_2samp(values, reference)
        return Test(float(r.statistic), float(r.pvalue))
    r = scipy.stats.ks_2samp(values, reference, method="asymp")
    return Test(float(r.statistic), ks_p_value(float(r.statistic), len(values), reference_count))


def ks_histogram(
    edges: np.ndarray, counts: np.ndarray, reference: np.ndarray, reference_count: int | None = None
) -> Test:
    """KS from a histogram: the two CDFs compared at the bin edges only.

    The window's CDF is known exactly at each edge (the share of values left of it; at the last edge, all of
    them), the reference's is read from its sample the same way. Between edges the window's CDF is unknown,
    so this D is a *lower bound* on the D of the raw values (equal when the bins are fine enough), and its
    p-value (asymptotic, for the effective n of the window's total and the reference's count) an upper bound:
    a coarse histogram can hide drift, never invent it.
    """
    n = int(np.sum(counts))
    if n == 0:
        raise ValueError("counts: the histogram is empty; need at least one value")
    reference = np.sort(reference)
    window_cdf = np.concatenate([[0.0], np.cumsum(counts[:-1]) / n, [1.0]])  # share < each edge; 1 at the last
    left = np.searchsorted(reference, edges[:-1], side="left") / len(reference)  # share < edge
    last = np.searchsorted(reference, edges[-1:], side="right") / len(reference)  # share <= the last edge
    d = float(np.max(np.abs(window_cdf - np.concatenate([left, last]))))
    return Test(d, ks_p_value(d, n, reference_count or len(reference)))


# ---- Wasserstein-1 ---------------------------------------------------------------------------------------


def wasserstein(values: np.ndarray, reference: np.ndarray, scale: float) -> float:
    """Wasserstein-1 distance (``scipy.stats.wasserstein_distance``) over ``scale``, the reference's standard
    deviation, so one threshold fits every feature. A constant reference (scale 0) has no spread to scale
    by: its distance is left in the feature's own units."""
    import scipy.stats

    return float(scipy.stats.wasserstein_distance(values, reference)) / _scale(scale)


def wasserstein_histogram(edges: np.ndarray, counts: np.ndarray, reference: np.ndarray, scale: float) -> float:
    """Wasserstein-1 of a histogram, its counts placed at the bin midpoints (weights), over ``scale``."""
    import scipy.stats

    mids = (edges[:-1] + edges[1:]) / 2
    weights = np.asarray(counts, dtype=float)
    if not weights.sum() > 0:
        raise ValueError("counts: the histogram is empty; need at least one value")
    return float(scipy.stats.wasserstein_distance(mids, reference, u_weights=weights)) / _scale(scale)


def _scale(scale: float) -> float:
    return scale if scale > 0 else 1.0


# ---- categorical -----------------------------------------------------------------------------------------


def align_categories(
    window: Mapping[str, int], reference: Mapping[str, int], window_other: int = 0, reference_other: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(window counts, reference counts) over the same cells: the reference's categories in its order, then
    one "other" cell for what the reference pooled (``reference_other``) and every category it never saw
    (plus what the window pooled, ``window_other``). The other cell is left out when both sides are empty."""
    names = list(reference)
    observed = [window.get(name, 0) for name in names]
    expected = [reference[name] for name in names]
    other = window_other + sum(c for name, c in window.items() if name not in reference)
    if other or reference_other:
        observed.append(other)
        expected.append(reference_other)
    return np.asarray(observed, dtype=float), np.asarray(expected, dtype=float)


def chi_square(observed: np.ndarray, reference: np.ndarray, epsilon: float = CHI2_EPSILON) -> Test:
    """Chi-square goodness of fit (``scipy.stats.chisquare``) of the window's counts against the reference's
    proportions scaled to the window's total.

    A cell the reference never saw (its "other" cell, or a category with no count) would have an expected
    count of 0 and divide by zero; it gets ``epsilon`` expected values instead, and the expected counts are
    renormalised to the window's total. So a handful of unseen values adds little, while hundreds of them
    (a new category taking over) give a huge statistic: that is drift, and it should.
    """
    import scipy.stats

    n = float(np.sum(observed))
    if not n > 0:
        raise ValueError("observed: the window has no values; need at least one")
    shares = _shares(reference, "reference")
    if len(shares) < 2:
        return Test(0.0, 1.0)  # one cell: every value falls in it, nothing to test
    expected = np.maximum(shares * n, epsilon)
    expected *= n / expected.sum()
    r = scipy.stats.chisquare(observed, expected)
    return Test(float(r.statistic), float(r.pvalue))


def js_distance(observed: np.ndarray, reference: np.ndarray) -> float:
    """Jensen–Shannon distance, base 2 (0 identical .. 1 disjoint), between the two distributions over the
    same cells (``scipy.spatial.distance.jensenshannon``; counts are normalised)."""
    from scipy.spatial.distance import jensenshannon

    p, q = _shares(observed, "window"), _shares(reference, "reference")
    return float(np.clip(jensenshannon(p, q, base=2), 0.0, 1.0))


# ---- across features -------------------------------------------------------------------------------------


def adjust(p_values: np.ndarray, method: Correction) -> np.ndarray:
    """p-values adjusted for testing every feature at once, to compare with alpha directly.

    ``bonferroni``: p * m (the chance of any false alarm among m features stays under alpha); ``fdr_bh``:
    Benjamini–Hochberg (``scipy.stats.false_discovery_control``; the expected share of false alarms among
    the features flagged stays under alpha); ``none``: as they are.
    """
    import scipy.stats

    p = np.asarray(p_values, dtype=float)
    if p.size == 0 or method == "none":
        return p
    if method == "bonferroni":
        return np.minimum(p * p.size, 1.0)
    if method == "fdr_bh":
        return np.asarray(scipy.stats.false_discovery_control(p, method="bh"))
    raise ValueError(f"correction: {method!r}; use 'bonferroni', 'fdr_bh' or 'none'")
