"""One memory series (a GPU's used memory, a process's GPU memory, a trainer's RSS) and its growth verdict.

Why this shape, from the raw readings to the alert:

1. Warm-up is ignored: loading a model and filling the caching allocator is growth, not a leak.
2. Readings are folded into blocks (default 60 s). The *floor* of a block is a low quantile (default 5 %)
   of all readings from its start over the following horizon (default 8 min). A leak is memory that is
   never given back, so it raises the floor; memory that comes back within the horizon (a checkpoint's
   staging buffers, periodic fragmentation released by the allocator, evaluation buffers) does not, and a
   quantile rather than the minimum ignores rare readings far below the level. The floor of a block is
   only known once its horizon has passed: the price of telling a leak from a slow sawtooth.
3. Neighbouring floors share most of their readings, so the trend's interval is widened for that serial
   correlation (Hamed & Rao), or the floor's wander would pass for a trend.
4. Theil-Sen over the floor in a sliding window (default 2 h, subsampled to at most ``max_points``), with
   pairs across level shifts left out (allocator plateaus), gives a slope in % of capacity per hour and a
   Kendall-based confidence interval. The alert fires when the LOWER bound exceeds the threshold (we are
   confident the growth is at least that fast) AND two guards agree: the floor rose over the window by
   more than ``noise_k`` x the reading noise (a short window cannot tell a wander of the floor from a
   trend), and both halves of the window rise (``steady_ratio``: a single shift too small to be cut as a
   jump leaves one half flat). It clears when the lower bound falls below ``clear_ratio`` x threshold.
5. The same test runs over a second, short window (default 30 min) before the long one. A leak that starts
   after hours of flat memory only tilts a 2 h window once it fills most of it (80-97 min); the short
   window sees it after its floor horizon and 10 points, as a leak present from the start is seen. Two
   tests of one series double the chances of a fluke, so the short one asks for 99 % confidence
   (``short_confidence``; at 98 % it added one false alarm in 300 node-days). The alert fires when either
   window passes; the verdict carries the window that did (else the one with the strongest evidence, the
   highest lower bound), and the alert clears when that bound is low again.

Time only comes from the timestamps given to :meth:`add`: simulated hours run in milliseconds.

Tried and left out, measured with tests/benchmarks/bench_leak.py (so nobody tries them again blindly):

- Windows of 15-20 min, or a short window whose alert needs less than the long window's guards: near a
  plateau step the floor is a ramp, not a step (as the horizon slides past the step the quantile climbs the
  fragmentation staircase), and a window of barely two horizons takes that ramp for growth (hundreds of
  false alarms per 100 node-days). Thirty minutes with both guards is the shortest we found safe.
- Floors detrended by the slope estimated so far (to smooth the staircase a leak's floor makes): it feeds
  itself. When the lowest reading of successive horizons is the same reading, subtracting ``b * (t - t0)``
  makes the floors rise at exactly ``b``, so a chance positive slope confirms itself (5 false alarms in 400
  leak-free series-days, all in the first 40 min).
- Floor points time-stamped by the mean time of their low readings: 95 % of leaks found within 30 min instead
  of 92 %, but several points then stand for one reading and the interval is too narrow (1-3 false alarms in
  400 series-days).
- Other floor statistics (the mean of the lowest 5-25 % or 5-50 % of a horizon's readings instead of its 5 %
  quantile), the Mann-Kendall tie correction, and pairs restricted to points at least a horizon apart: 90-93 %
  of leaks within 30 min, no better than the plain floor. What delays the slow 8 % is information, not the
  estimator: with a 5-8 min fragmentation cycle the floor learns one new level per cycle, 3-4 by minute 30.
- A cycle-difference test next to the floor (estimate the cycle's period from the readings, by
  autocorrelation or by the lag whose differences spread least, then test the median of ``x(t) - x(t - P)``,
  which a leak raises by its rate x P): 92-93 % of leaks within 30 min, and thousands of false alarms per 100
  node-days. A period wrong by a few seconds turns the fragmentation staircase's own slope into a trend, and
  a checkpoint spike in the window stops the test as long as it stops the floor.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from agent.leak.estimate import Z_TWO_SIDED, Trend, segments_from_jumps, theil_sen


@dataclass(frozen=True, slots=True)
class LeakConfig:
    threshold_pct_per_h: float = 0.1
    confidence: float = 0.95
    warmup_s: float = 300.0
    block_s: float = 60.0
    floor_horizon_s: float = 480.0
    window_s: float = 7200.0
    short_window_s: float = 1800.0  # 0: only the long window
    short_confidence: float = 0.99
    max_points: int = 48
    min_points: int = 10
    floor_quantile: float = 0.05
    serial_correction: bool = True
    min_jump_pct: float = 0.1
    clear_ratio: float = 0.5
    steady_ratio: float = 0.5
    noise_k: float = 1.0
    report_every_s: float = 300.0

    def validate(self) -> None:
        """Raise ValueError naming the option when a value cannot work."""
        checks = [
            ("threshold_pct_per_h", self.threshold_pct_per_h > 0, "> 0"),
            ("confidence", self.confidence in Z_TWO_SIDED, f"one of {sorted(Z_TWO_SIDED)}"),
            ("short_confidence", self.short_confidence in Z_TWO_SIDED, f"one of {sorted(Z_TWO_SIDED)}"),
            ("warmup_s", self.warmup_s >= 0, ">= 0"),
            ("block_s", self.block_s > 0, "> 0"),
            ("floor_horizon_s", self.floor_horizon_s >= 0, ">= 0"),
            ("window_s", self.window_s >= 4 * self.block_s, ">= 4 x block_s"),
            (
                "short_window_s",
                self.short_window_s == 0 or 4 * self.block_s <= self.short_window_s < self.window_s,
                "0 or in [4 x block_s, window_s)",
            ),
            ("max_points", self.max_points >= self.min_points, ">= min_points"),
            ("min_points", self.min_points >= 4, ">= 4"),
            ("floor_quantile", 0 <= self.floor_quantile <= 0.5, "in [0, 0.5]"),
            ("min_jump_pct", self.min_jump_pct > 0, "> 0"),
            ("clear_ratio", 0 <= self.clear_ratio <= 1, "in [0, 1]"),
            ("steady_ratio", 0 <= self.steady_ratio <= 1, "in [0, 1]"),
            ("noise_k", self.noise_k >= 0, ">= 0"),
            ("report_every_s", self.report_every_s > 0, "> 0"),
        ]
        for name, ok, want in checks:
            if not ok:
                raise ValueError(f"leak.{name} must be {want}, got {getattr(self, name)!r}")


@dataclass(frozen=True, slots=True)
class Verdict:
    """The latest estimate of a series, in % of capacity per hour."""

    at: float
    slope: float
    lower: float
    upper: float
    samples: int
    points: int
    window_s: float
    alert: bool
    changed: bool  # the alert state flipped at this evaluation


@dataclass(frozen=True, slots=True)
class _Fit:
    """The trend over one window and whether it passes every test of the alert."""

    trend: Trend
    points: int
    span_s: float
    passes: bool


def _low_quantile(x: np.ndarray, q: float) -> float:
    """The order statistic at rank floor(q * (n - 1)): a plain partition, cheaper than np.quantile."""
    k = int(q * (len(x) - 1))
    return float(np.partition(x, k)[k])


class LeakSeries:
    """Feed readings with :meth:`add` (or :meth:`add_many`); each closed block re-evaluates the trend.

    ``capacity_bytes`` turns bytes into % (the GPU's total memory, or the host's for RSS). Memory is
    bounded: the raw readings of one floor horizon, and one floor value per block of the window.
    """

    def __init__(self, capacity_bytes: float, config: LeakConfig | None = None) -> None:
        if not capacity_bytes > 0:
            raise ValueError(f"capacity_bytes must be > 0, got {capacity_bytes!r}")
        self.config = config or LeakConfig()
        self.config.validate()
        self.capacity = float(capacity_bytes)
        self._h = max(0, math.ceil(self.config.floor_horizon_s / self.config.block_s))
        self._raw: deque[tuple[float, int, np.ndarray]] = deque()  # (mean time, block no, readings in %)
        keep = math.ceil(self.config.window_s / self.config.block_s) + 2
        self._ft: deque[float] = deque(maxlen=keep)  # floor series: time, level (%), block number
        self._fy: deque[float] = deque(maxlen=keep)
        self._fi: deque[int] = deque(maxlen=keep)
        self._noise_blocks: deque[float] = deque(maxlen=60)
        self._cur: list[float] = []
        self._cur_t = 0.0
        self._block_no: int | None = None
        self.start: float | None = None
        self.samples = 0
        self.alert = False
        self.last: Verdict | None = None
        self.evaluations = 0

    def reset(self) -> None:
        """Forget everything (the process restarted): warm-up starts again."""
        self.__init__(self.capacity, self.config)  # type: ignore[misc]

    def add(self, t: float, value_bytes: float) -> Verdict | None:
        """One reading at time ``t`` (seconds). Returns a verdict when this reading closed a block."""
        if self.start is None:
            self.start = t
        block = int((t - self.start) // self.config.block_s)
        verdict = None
        if block != self._block_no:
            if self._cur:
                verdict = self._close()
            self._block_no, self._cur, self._cur_t = block, [], 0.0
        self._cur.append(100.0 * value_bytes / self.capacity)
        self._cur_t += t
        self.samples += 1
        return verdict

    def add_many(self, ts: np.ndarray, values: np.ndarray) -> list[Verdict]:
        """Many readings in time order (a replay, or the benchmark): same result as calling :meth:`add`."""
        out = []
        for t, v in zip(ts.tolist(), values.tolist(), strict=True):
            if (verdict := self.add(t, v)) is not None:
                out.append(verdict)
        return out

    def _close(self) -> Verdict | None:
        assert self.start is not None and self._block_no is not None
        t_mean = self._cur_t / len(self._cur)
        if t_mean - self.start < self.config.warmup_s:
            return None
        vals = np.asarray(self._cur)
        if len(vals) > 2:
            self._noise_blocks.append(1.4826 * float(np.median(np.abs(np.diff(vals)))) / math.sqrt(2.0))
        self._raw.append((t_mean, self._block_no, vals))
        if len(self._raw) > self._h:
            t0, no, _ = self._raw[0]
            level = _low_quantile(np.concatenate([r for _, _, r in self._raw]), self.config.floor_quantile)
            self._ft.append(t0)
            self._fy.append(level)
            self._fi.append(no)
            self._raw.popleft()
        return self.evaluate(t_mean)

    def _noise(self) -> float:
        """Typical reading noise (%): the median over recent blocks of each block's robust sd of successive
        differences. A floor that moved less than a few of these over the window has not shown a trend."""
        return float(np.median(self._noise_blocks)) if self._noise_blocks else 0.0

    @staticmethod
    def _steady(hours: np.ndarray, y: np.ndarray, segments: np.ndarray, cfg: LeakConfig) -> bool:
        """Does the growth go on through the window? Both halves must rise at >= ``steady_ratio`` x the
        threshold. A leak keeps raising the floor; a single level shift (a plateau too small to be cut as a
        jump) leaves one half flat. A leak in steps keeps both halves rising, so it still passes."""
        if cfg.steady_ratio <= 0:
            return True
        mid = len(hours) // 2
        for part in (slice(0, mid), slice(mid, None)):
            half = theil_sen(hours[part], y[part], segments[part], cfg.confidence)
            if half is None or half.slope <= cfg.steady_ratio * cfg.threshold_pct_per_h:
                return False
        return True

    def _window(
        self, floor: tuple[np.ndarray, np.ndarray, np.ndarray], noise: float, window_s: float, confidence: float
    ) -> _Fit | None:
        """The trend of the ``floor`` (times, levels, block numbers) over its last ``window_s`` and whether it
        passes the alert's tests; ``None`` while the window has too few points or pairs to judge."""
        cfg = self.config
        t, y, idx = floor
        keep = t >= t[-1] - window_s
        t, y, idx = t[keep], y[keep], idx[keep]
        stride = max(1, math.ceil(len(t) / cfg.max_points))
        if stride > 1:
            pick = idx % stride == idx[-1] % stride
            t, y = t[pick], y[pick]
        if len(t) < cfg.min_points:
            return None
        hours = (t - t[0]) / 3600.0
        lag = math.ceil(self._h / stride) if cfg.serial_correction else 0
        span = max(1, math.ceil(self._h / 2 / stride))
        segments = segments_from_jumps(y, cfg.min_jump_pct, span=span)
        trend: Trend | None = theil_sen(hours, y, segments, confidence, max_lag=lag)
        if trend is None or trend.pairs < cfg.min_points * (cfg.min_points - 1) // 2:
            return None  # a jump split the points: too few pairs inside segments to judge yet
        passes = (
            trend.lower > cfg.threshold_pct_per_h
            and trend.lower * float(hours[-1]) >= cfg.noise_k * noise
            and self._steady(hours, y, segments, cfg)
        )
        return _Fit(trend, len(t), float(t[-1] - t[0]), passes)

    def evaluate(self, now: float) -> Verdict | None:
        """Re-estimate from the floor so far; ``None`` until there is enough of it after warm-up."""
        cfg = self.config
        if len(self._ft) < cfg.min_points:
            return None
        windows = [(cfg.window_s, cfg.confidence)]
        if 0 < cfg.short_window_s < self._ft[-1] - self._ft[0]:
            # only once the floor outgrows the short window: before, both windows hold the same points
            windows.insert(0, (cfg.short_window_s, cfg.short_confidence))
        floor = (np.asarray(self._ft), np.asarray(self._fy), np.asarray(self._fi))
        noise = self._noise()
        fits = []
        for window_s, confidence in windows:
            fit = self._window(floor, noise, window_s, confidence)
            if fit is not None:
                fits.append(fit)
                if fit.passes:
                    break  # so a passing fit is always the last one
        if not fits:
            return None
        self.evaluations += 1
        best = fits[-1] if fits[-1].passes else max(fits, key=lambda f: f.trend.lower)
        was = self.alert
        if best.passes:
            self.alert = True
        elif best.trend.lower <= cfg.threshold_pct_per_h * cfg.clear_ratio:
            self.alert = False
        self.last = Verdict(
            at=now,
            slope=best.trend.slope,
            lower=best.trend.lower,
            upper=best.trend.upper,
            samples=self.samples,
            points=best.points,
            window_s=best.span_s,
            alert=self.alert,
            changed=self.alert != was,
        )
        return self.last
