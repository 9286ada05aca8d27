"""Robust trend of a short series: Theil-Sen slope with Sen's Kendall-based confidence interval.

Why Theil-Sen: the slope is the median of all pairwise slopes, so a few wild points (a checkpoint's staging
buffers, a reading taken mid-reallocation) move it little, and the confidence interval comes from Kendall's
S without assuming Gaussian noise (Sen 1968; Hollander & Wolfe). Pairs may be restricted to *segments*:
a level shift (the caching allocator growing its pool once) is not a trend, so pairs straddling a detected
jump are left out and S's variance is summed over segments (as the seasonal Kendall test does per season).
Everything is numpy over at most a few hundred points: one estimate costs tens of microseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from agent.leak.config import Z_TWO_SIDED


@dataclass(frozen=True, slots=True)
class Trend:
    """Slope and its confidence bounds, in the units of y per unit of t."""

    slope: float
    lower: float
    upper: float
    pairs: int
    mk_z: float  # Mann-Kendall z of the segmented S (continuity corrected): evidence of a monotone trend


@lru_cache(maxsize=64)
def _pairs(n: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    i, j = np.triu_indices(n, k=1)
    return i, j


def _median(x: NDArray[np.float64]) -> float:
    """np.median without its dispatch overhead (this runs once a minute per series, on < 200 points)."""
    n = len(x)
    s = np.sort(x)
    return float(s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2]))


def segments_from_jumps(y: NDArray[np.float64], min_jump: float, k: float = 4.0, span: int = 1) -> NDArray[np.intp]:
    """Label points with a segment number that changes at each level shift.

    A shift is a move over at most ``span`` neighbouring steps that departs from the series' typical step
    (the median, which is the trend's own increment) by more than ``k`` robust standard deviations and by at
    least ``min_jump``; every step inside such a move is cut, so a shift smeared over a few points (a
    floor's quantile crossing a step) leaves its ramp in tiny segments that carry no pairs. A steady leak
    moves every step a little, so it never looks like a shift, whatever its rate.
    """
    n = len(y)
    if n < 3:
        return np.zeros(n, dtype=np.intp)
    d = y[1:] - y[:-1]
    med = _median(d)
    dev = d - med
    scale = 1.4826 * _median(np.abs(dev))
    thr = max(k * scale, min_jump)
    cut = np.abs(dev) > thr
    for m in range(2, min(span, n - 1) + 1):
        big = np.flatnonzero(np.abs(y[m:] - y[:-m] - m * med) > thr)
        for a in big:
            cut[a : a + m] = True
    return np.concatenate(([0], np.cumsum(cut))).astype(np.intp)


def _average_ranks(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Ranks with ties sharing their mean rank: a flat stretch of a floor must not look like a run."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return (ends - (counts - 1) / 2.0)[inverse]


def serial_inflation(t: NDArray[np.float64], y: NDArray[np.float64], slope: float, max_lag: int) -> float:
    """How much serial correlation inflates Var(S): Hamed & Rao's (1998) n/n* from the autocorrelation of
    the ranks of the detrended series, over lags 1..``max_lag`` (the range where points share data).

    Neighbouring points of a smoothed series (a running floor) are not independent; without this factor
    the interval would be too narrow and a wandering floor would look like a trend."""
    n = len(y)
    if max_lag < 1 or n < 4:
        return 1.0
    r = _average_ranks(y - slope * t)
    r -= r.mean()
    denom = float(np.dot(r, r))
    if denom <= 0:
        return 1.0
    total = 0.0
    for k in range(1, min(max_lag, n - 3) + 1):
        rho = float(np.dot(r[:-k], r[k:])) / denom
        if rho > 0:
            total += (n - k) * (n - k - 1) * (n - k - 2) * rho
    return 1.0 + 2.0 * total / (n * (n - 1) * (n - 2))


def theil_sen(
    t: NDArray[np.float64],
    y: NDArray[np.float64],
    segments: NDArray[np.intp] | None = None,
    confidence: float = 0.95,
    max_lag: int = 0,
) -> Trend | None:
    """Theil-Sen slope of y over t with a two-sided ``confidence`` interval; ``None`` with too few pairs.

    With ``segments``, only pairs inside one segment count. The interval is Sen's: with N pair slopes
    sorted and C = z * sqrt(Var S), the bounds are the slopes of rank (N - C)/2 and (N + C)/2 + 1; ties
    are not corrected for, which makes the interval slightly wider (more conservative). ``max_lag`` > 0
    inflates Var S for serial correlation up to that lag (see :func:`serial_inflation`).
    """
    if confidence not in Z_TWO_SIDED:
        raise ValueError(f"confidence must be one of {sorted(Z_TWO_SIDED)}, got {confidence}")
    n = len(t)
    if n < 3:
        return None
    i, j = _pairs(n)
    if segments is not None:
        same = segments[i] == segments[j]
        i, j = i[same], j[same]
        counts = np.bincount(segments).astype(np.float64)
    else:
        counts = np.array([float(n)])
    dt = t[j] - t[i]
    ok = dt > 0
    i, j, dt = i[ok], j[ok], dt[ok]
    npairs = len(dt)
    if npairs < 3:
        return None
    dy = y[j] - y[i]
    slopes = np.sort(dy / dt)
    s = float(np.sign(dy).sum())
    mid = npairs // 2
    slope = float(slopes[mid] if npairs % 2 else 0.5 * (slopes[mid - 1] + slopes[mid]))
    var_s = float(np.sum(counts * (counts - 1) * (2 * counts + 5)) / 18.0)
    if max_lag > 0:
        var_s *= serial_inflation(t, y, slope, max_lag)
    c = Z_TWO_SIDED[confidence] * np.sqrt(var_s)
    lo = int(np.floor((npairs - c) / 2.0))
    hi = int(np.ceil((npairs + c) / 2.0))
    lo = min(max(lo, 0), npairs - 1)
    hi = min(max(hi, 0), npairs - 1)
    mk_z = 0.0 if var_s <= 0 else (s - np.sign(s)) / np.sqrt(var_s)
    return Trend(slope=slope, lower=float(slopes[lo]), upper=float(slopes[hi]), pairs=npairs, mk_z=float(mk_z))
