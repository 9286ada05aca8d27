"""Synthetic GPU-memory series with the structure real training shows, to measure the leak detector.

What a trainer's memory looks like through NVML, and what each term models (all in % of capacity):

- warm-up: weights load and the caching allocator fills its pool over the first minutes;
- reading noise: small Gaussian jitter plus heavy-tailed outliers (cuBLAS/NCCL workspaces come and go);
- allocator plateaus: now and then the pool grows (a new shape) or shrinks (``empty_cache``) by a step of
  0.2-1 % (hundreds of MB to GBs: whole pool segments), staying within +-2 % of its base level; smaller,
  frequent allocator moves are the fragmentation staircase below;
- checkpoint spikes: every 30-60 min, staging buffers add a few % for tens of seconds to a few minutes;
- periodic fragmentation: the pool creeps up by a fraction of a % in small allocation steps, then the
  allocator releases it (garbage-collection threshold), every few minutes;
- glitches: rare single readings far below the level (a reading taken mid-reallocation);
- the leak: a steady linear rise of ``leak_pct_per_h`` from ``leak_onset_s`` on.

The parameters are drawn per series, so a sample of series covers quiet and busy trainers. They are our
assumptions, stated here so the benchmark's figures can be read against them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Profile:
    base_pct: float
    warmup_s: float
    noise_pct: float
    outlier_rate: float
    plateau_rate_per_h: float
    plateau_step_pct: float
    ckpt_every_s: float
    ckpt_pct: float
    ckpt_len_s: float
    frag_period_s: float
    frag_pct: float
    glitch_rate: float

    @staticmethod
    def draw(rng: np.random.Generator) -> Profile:
        return Profile(
            base_pct=rng.uniform(40, 90),
            warmup_s=rng.uniform(60, 240),
            noise_pct=rng.uniform(0.005, 0.05),
            outlier_rate=rng.uniform(0.0, 0.01),
            plateau_rate_per_h=rng.uniform(0.05, 0.5),
            plateau_step_pct=rng.uniform(0.3, 1.0),
            ckpt_every_s=rng.uniform(1800, 3600),
            ckpt_pct=rng.uniform(1.0, 5.0),
            ckpt_len_s=rng.uniform(20, 240),
            frag_period_s=rng.uniform(120, 480) if rng.random() < 0.7 else 0.0,
            frag_pct=rng.uniform(0.05, 0.5),
            glitch_rate=rng.uniform(0, 2e-4),
        )


def synthetic_series(
    rng: np.random.Generator,
    duration_s: float,
    dt_s: float = 10.0,
    *,
    capacity_bytes: float = 141e9,
    leak_pct_per_h: float = 0.0,
    leak_onset_s: float = 0.0,
    profile: Profile | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Times (s from 0) and used bytes of one series, sampled every ``dt_s``."""
    p = profile or Profile.draw(rng)
    t = np.arange(0.0, duration_s, dt_s)
    n = len(t)
    # warm-up: a ramp to the base level with an overshoot that the allocator trims
    level = p.base_pct * np.minimum(1.0, t / p.warmup_s)
    level += np.where(t < p.warmup_s * 1.5, 0.5 * np.exp(-t / p.warmup_s), 0.0)
    # allocator plateaus: steps at Poisson times, random sign, kept within +-2 % of the base
    n_steps = rng.poisson(p.plateau_rate_per_h * duration_s / 3600.0)
    if n_steps:
        at = np.sort(rng.uniform(p.warmup_s, duration_s, n_steps))
        steps = rng.uniform(0.2, p.plateau_step_pct, n_steps) * rng.choice([-1.0, 1.0], n_steps)
        offsets = np.clip(np.cumsum(steps), -2.0, 2.0)
        level += np.concatenate(([0.0], offsets))[np.searchsorted(at, t, side="right")]
    # checkpoint spikes
    phase = rng.uniform(0, p.ckpt_every_s)
    since = (t - phase) % p.ckpt_every_s
    level += np.where((t > phase) & (since < p.ckpt_len_s), p.ckpt_pct, 0.0)
    # periodic fragmentation: a staircase of small allocation steps released at the end of each period
    if p.frag_period_s > 0:
        cyc = ((t + rng.uniform(0, p.frag_period_s)) % p.frag_period_s) / p.frag_period_s
        level += p.frag_pct * np.floor(cyc * 8) / 8
    # noise, outliers, glitches
    level += p.noise_pct * rng.standard_normal(n)
    out = rng.random(n) < p.outlier_rate
    level[out] += p.noise_pct * 5 * rng.standard_t(3, out.sum())
    gl = rng.random(n) < p.glitch_rate
    level[gl] -= rng.uniform(0.5, 3.0, gl.sum())
    # the leak
    level += leak_pct_per_h * np.maximum(0.0, t - leak_onset_s) / 3600.0
    return t, np.clip(level, 0.0, 100.0) * capacity_bytes / 100.0
