"""The detection test's arithmetic: the binomial tail of matched bits, and its exact null."""

from __future__ import annotations

import math

from scipy import stats


def p_value(matched: int, bits: int) -> float:
    """P[Binomial(bits, 1/2) >= matched]: how often an unmarked model matches this many bits or more."""
    if not 0 <= matched <= bits:
        raise ValueError(f"matched must be in [0, {bits}], got {matched}")
    return float(stats.binom.sf(matched - 1, bits, 0.5))


def log10_p(matched: int, bits: int) -> float:
    """log10 of :func:`p_value`, finite where the p-value underflows (all 1024 bits: 10^-308 and below)."""
    logsf = float(stats.binom.logsf(matched - 1, bits, 0.5))
    return logsf / math.log(10.0)


def threshold_bits(bits: int, alpha: float) -> int:
    """The fewest matched bits whose p-value is below ``alpha``: the decision threshold in bits."""
    for k in range(bits // 2, bits + 1):
        if p_value(k, bits) < alpha:
            return k
    return bits + 1


def randomized_pit(matched: int, bits: int, u: float) -> float:
    """A uniform(0, 1) variate under the null, from a discrete count: F(k - 1) + u (F(k) - F(k - 1)) with
    ``u`` uniform. A KS test against the uniform law then checks the binomial null exactly, which the
    discrete p-values themselves (not uniform) cannot."""
    lo = float(stats.binom.cdf(matched - 1, bits, 0.5))
    hi = float(stats.binom.cdf(matched, bits, 0.5))
    return lo + u * (hi - lo)
