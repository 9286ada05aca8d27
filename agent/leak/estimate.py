"""Robust trend of a short series: Theil-Sen slope with Sen's Kendall-based confidence interval.

Why Theil-Sen: the slope is the median of all pairwise slopes, so a few wild points (a checkpoint's staging
buffers, a reading taken mid-reallocation) move it little, and the confidence interval comes from Kendall's
S without assuming Gaussian noise (Sen 1968; Hollander & Wolfe). Pairs may be restricted to *segments*:
a level shift (the caching allocator growing its pool once) is not a trend, so pairs straddling a detected
jump are left out and S's variance is summed over segments (as the seasonal Kendall test does per season).
Plain Python over at most ``max_points`` (48) points, about a thousand pairs: no numpy, so the agent does
not carry its ~15 MiB for a computation this small. Any sequence of floats is accepted (numpy arrays too).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from myolo.agent.leak.config import Z_TWO_SIDED


@dataclass(frozen=True, slots=True)
class Trend:
    """Slope and its confidence bounds, in the units of y per unit of t."""

    slope: float
    lower: float
    upper: float
    pairs: int
    mk_z: float  # Mann-Kendall z of the segmented S (continuity corrected): evidence of a monotone trend


def median(x: Sequence[float]) -> float:
    """The median of a non-empty sequence (the mean of the middle two for an even length)."""
    s = sorted(x)
    n = len(s)
    return float(s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2]))


def segments_from_jumps(y: Sequence[float], min_jump: float, k: float = 4.0, span: int = 1) -> list[int]:
    """Label points with a segment number that changes at each level shift.

    A shift is a move over at most ``span`` neighbouring steps that departs from the series' typical step
    (the median, which is the trend's own increment) by more than ``k`` robust standard deviations and by at
    least ``min_jump``; every step inside such a move is cut, so a shift smeared over a few points (a
    floor's quantile crossing a step) leaves its ramp in tiny segments that carry no pairs. A steady leak
    moves every step a little, so it never looks like a shift, whatever its rate.
    """
    n = len(y)
    if n < 3:
        return [0] * n
    med = median([y[a + 1] - y[a] for a in range(n - 1)])
    dev = [y[a + 1] - y[a] - med for a in range(n - 1)]
    thr = max(k * 1.4826 * median([abs(d) for d in dev]), min_jump)
    cut = [abs(d) > thr for d in dev]
    for m in range(2, min(span, n - 1) + 1):
        for a in range(n - m):
            if abs(y[a + m] - y[a] - m * med) > thr:
                cut[a : a + m] = [True] * len(cut[a : a + m])
    labels, current = [0], 0
    for c in cut:
        current += c
        labels.append(current)
    return labels


def _average_ranks(x: Sequence[float]) -> list[float]:
    """1-based ranks with ties sharing their mean rank: a flat stretch of a floor must not look like a run."""
    order = sorted(range(len(x)), key=x.__getitem__)
    ranks = [0.0] * len(x)
    a = 0
    while a < len(order):
        b = a
        while b + 1 < len(order) and x[order[b + 1]] == x[order[a]]:
            b += 1
        for i in order[a : b + 1]:
            ranks[i] = (a + b) / 2.0 + 1.0
        a = b + 1
    return ranks


def serial_inflation(t: Sequence[float], y: Sequence[float], slope: float, max_lag: int) -> float:
    """How much serial correlation inflates Var(S): Hamed & Rao's (1998) n/n* from the autocorrelation of
    the ranks of the detrended series, over lags 1..``max_lag`` (the range where points share data).

    Neighbouring points of a smoothed series (a running floor) are not independent; without this factor
    the interval would be too narrow and a wandering floor would look like a trend."""
    n = len(y)
    if max_lag < 1 or n < 4:
        return 1.0
    r = _average_ranks([yi - slope * ti for ti, yi in zip(t, y, strict=True)])
    mean = sum(r) / n
    r = [ri - mean for ri in r]
    denom = math.fsum(ri * ri for ri in r)
    if denom <= 0:
        return 1.0
    total = 0.0
    for k in range(1, min(max_lag, n - 3) + 1):
        rho = math.fsum(r[a] * r[a + k] for a in range(n - k)) / denom
        if rho > 0:
            total += (n - k) * (n - k - 1) * (n - k - 2) * rho
    return 1.0 + 2.0 * total / (n * (n - 1) * (n - 2))


def theil_sen(
    t: Sequence[float],
    y: Sequence[float],
    segments: Sequence[int] | None = None,
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
    t, y = [float(v) for v in t], [float(v) for v in y]
    seg = [0] * n if segments is None else [int(v) for v in segments]
    slopes: list[float] = []
    s = 0
    for i in range(n):
        ti, yi, si = t[i], y[i], seg[i]
        for j in range(i + 1, n):
            dt = t[j] - ti
            if seg[j] == si and dt > 0:
                dy = y[j] - yi
                slopes.append(dy / dt)
                s += (dy > 0) - (dy < 0)
    npairs = len(slopes)
    if npairs < 3:
        return None
    slopes.sort()
    mid = npairs // 2
    slope = slopes[mid] if npairs % 2 else 0.5 * (slopes[mid - 1] + slopes[mid])
    counts: dict[int, int] = {}
    for v in seg:
        counts[v] = counts.get(v, 0) + 1
    var_s = sum(c * (c - 1) * (2 * c + 5) for c in counts.values()) / 18.0
    if max_lag > 0:
        var_s *= serial_inflation(t, y, slope, max_lag)
    c = Z_TWO_SIDED[confidence] * math.sqrt(var_s)
    lo = min(max(math.floor((npairs - c) / 2.0), 0), npairs - 1)
    hi = min(max(math.ceil((npairs + c) / 2.0), 0), npairs - 1)
    mk_z = 0.0 if var_s <= 0 else (s - (s > 0) + (s < 0)) / math.sqrt(var_s)
    return Trend(slope=slope, lower=slopes[lo], upper=slopes[hi], pairs=npairs, mk_z=mk_z)
