"""One memory series (a GPU's used memory, a process's GPU memory, a trainer's RSS) and its growth verdict.

Why this shape, from the raw readings to the alert (the options are :class:`LeakConfig`'s):

1. Warm-up (``warmup_s``) is ignored: loading a model and filling the caching allocator is growth, not a leak.
2. Readings are folded into blocks (``block_s``). The *floor* of a block is a low quantile (``floor_quantile``)
   of all readings from its start over the following horizon (``floor_horizon_s``). A leak is memory that is
   never given back, so it raises the floor; memory that comes back within the horizon (a checkpoint's
   staging buffers, periodic fragmentation released by the allocator, evaluation buffers) does not, and a
   quantile rather than the minimum ignores rare readings far below the level. The floor of a block is
   only known once its horizon has passed: the price of telling a leak from a slow sawtooth.
3. Neighbouring floors share most of their readings, so the trend's interval is widened for that serial
   correlation (Hamed & Rao), or the floor's wander would pass for a trend.
4. Theil-Sen over the floor in a sliding window (``window_s``, subsampled to at most ``max_points``), with
   pairs across level shifts left out (allocator plateaus), gives a slope in % of capacity per hour and a
   Kendall-based confidence interval. The alert fires when the LOWER bound exceeds the threshold (we are
   confident the growth is at least that fast) AND two guards agree: the floor rose over the window by
   more than ``noise_k`` x the reading noise (a short window cannot tell a wander of the floor from a
   trend), and both halves of the window rise (``steady_ratio``: a single shift too small to be cut as a
   jump leaves one half flat). It clears when the lower bound falls below ``clear_ratio`` x threshold.
5. The same test runs over a second, short window (``short_window_s``) before the long one. A leak that
   starts after hours of flat memory only tilts the long window once it fills most of it; the short window
   sees it after its floor horizon and ``min_points`` points, as a leak present from the start is seen. Two
   tests of one series double the chances of a fluke, so the short one asks for more confidence
   (``short_confidence``). The alert fires when either window passes; the verdict carries the window that
   did (else the one with the strongest evidence, the highest lower bound), and the alert clears when that
   bound is low again.

Time only comes from the timestamps given to :meth:`LeakSeries.add`: simulated hours run in milliseconds.
The variants measured and left out, with their figures, are in ``tests/benchmarks/leak.md``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from myolo.agent.leak.config import LeakConfig
from myolo.agent.leak.estimate import Trend, median, segments_from_jumps, theil_sen


@dataclass(frozen=True, slots=True)
class LeakEstimate:
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


def _low_quantile(x: list[float], q: float) -> float:
    """The order statistic at rank floor(q * (n - 1)) (no interpolation: a reading that was taken)."""
    return sorted(x)[int(q * (len(x) - 1))]


class LeakSeries:
    """Feed readings with :meth:`add` (or :meth:`add_many`); each closed block re-evaluates the trend.

    ``capacity_bytes`` turns bytes into % (the GPU's total memory, or the host's for RSS). Memory is
    bounded: the raw readings of one floor horizon, and one floor value per block of the window.
    """

    # set afresh by reset(), which also empties the deques built in __init__
    start: float | None  # time of the first reading
    samples: int
    alert: bool
    last: LeakEstimate | None
    evaluations: int
    _readings: list[float]  # of the block being filled, in % of capacity
    _readings_t_sum: float
    _block_no: int | None

    def __init__(self, capacity_bytes: float, config: LeakConfig | None = None) -> None:
        if not capacity_bytes > 0:
            raise ValueError(f"capacity_bytes must be > 0, got {capacity_bytes!r}")
        self.config = config or LeakConfig()
        self.capacity = float(capacity_bytes)
        self._horizon_blocks = max(0, math.ceil(self.config.floor_horizon_s / self.config.block_s))
        self._raw: deque[tuple[float, int, list[float]]] = deque()  # blocks of the horizon: mean time, no, readings
        keep = math.ceil(self.config.window_s / self.config.block_s) + 2
        # the floor, one point per block: its time, its level (% of capacity) and its block number
        self._floor_t: deque[float] = deque(maxlen=keep)
        self._floor_level: deque[float] = deque(maxlen=keep)
        self._floor_block: deque[int] = deque(maxlen=keep)
        self._noise_blocks: deque[float] = deque(maxlen=60)
        self.reset()

    def reset(self) -> None:
        """Forget every reading (the process restarted): warm-up starts again."""
        for kept in (self._raw, self._floor_t, self._floor_level, self._floor_block, self._noise_blocks):
            kept.clear()
        self._readings = []
        self._readings_t_sum = 0.0
        self._block_no = None
        self.start = None
        self.samples = 0
        self.alert = False
        self.last = None
        self.evaluations = 0

    def add(self, t: float, value_bytes: float) -> LeakEstimate | None:
        """One reading at time ``t`` (seconds). Returns a verdict when this reading closed a block."""
        if self.start is None:
            self.start = t
        block = int((t - self.start) // self.config.block_s)
        verdict = None
        if block != self._block_no:
            if self._readings:
                verdict = self._close()
            self._block_no, self._readings, self._readings_t_sum = block, [], 0.0
        self._readings.append(100.0 * value_bytes / self.capacity)
        self._readings_t_sum += t
        self.samples += 1
        return verdict

    def add_many(self, ts: Iterable[float], values: Iterable[float]) -> list[LeakEstimate]:
        """Many readings in time order (a replay, or the benchmark): same result as calling :meth:`add`."""
        out = []
        for t, v in zip(ts, values, strict=True):
            if (verdict := self.add(float(t), float(v))) is not None:
                out.append(verdict)
        return out

    def _close(self) -> LeakEstimate | None:
        assert self.start is not None and self._block_no is not None
        t_mean = self._readings_t_sum / len(self._readings)
        if t_mean - self.start < self.config.warmup_s:
            return None
        vals = self._readings
        if len(vals) > 2:
            steps = [abs(vals[a + 1] - vals[a]) for a in range(len(vals) - 1)]
            self._noise_blocks.append(1.4826 * median(steps) / math.sqrt(2.0))
        self._raw.append((t_mean, self._block_no, vals))
        if len(self._raw) > self._horizon_blocks:
            t0, no, _ = self._raw[0]
            level = _low_quantile([v for _, _, r in self._raw for v in r], self.config.floor_quantile)
            self._floor_t.append(t0)
            self._floor_level.append(level)
            self._floor_block.append(no)
            self._raw.popleft()
        return self.evaluate(t_mean)

    def _noise(self) -> float:
        """Typical reading noise (%): the median over recent blocks of each block's robust sd of successive
        differences. A floor that moved less than a few of these over the window has not shown a trend."""
        return median(self._noise_blocks) if self._noise_blocks else 0.0

    @staticmethod
    def _steady(hours: list[float], y: list[float], segments: list[int], cfg: LeakConfig) -> bool:
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
        self, floor: tuple[list[float], list[float], list[int]], noise: float, window_s: float, confidence: float
    ) -> _Fit | None:
        """The trend of the ``floor`` (times, levels, block numbers) over its last ``window_s`` and whether it
        passes the alert's tests; ``None`` while the window has too few points or pairs to judge."""
        cfg = self.config
        since = floor[0][-1] - window_s
        points = [p for p in zip(*floor, strict=True) if p[0] >= since]
        stride = max(1, math.ceil(len(points) / cfg.max_points))
        if stride > 1:
            last = points[-1][2] % stride
            points = [p for p in points if p[2] % stride == last]
        if len(points) < cfg.min_points:
            return None
        t = [p[0] for p in points]
        y = [p[1] for p in points]
        hours = [(ti - t[0]) / 3600.0 for ti in t]
        lag = math.ceil(self._horizon_blocks / stride) if cfg.serial_correction else 0
        span = max(1, math.ceil(self._horizon_blocks / 2 / stride))
        segments = segments_from_jumps(y, cfg.min_jump_pct, span=span)
        trend: Trend | None = theil_sen(hours, y, segments, confidence, max_lag=lag)
        if trend is None or trend.pairs < cfg.min_points * (cfg.min_points - 1) // 2:
            return None  # a jump split the points: too few pairs inside segments to judge yet
        passes = (
            trend.lower > cfg.threshold_pct_per_h
            and trend.lower * hours[-1] >= cfg.noise_k * noise
            and self._steady(hours, y, segments, cfg)
        )
        return _Fit(trend, len(t), t[-1] - t[0], passes)

    def evaluate(self, now: float) -> LeakEstimate | None:
        """Re-estimate from the floor so far; ``None`` until there is enough of it after warm-up."""
        cfg = self.config
        if len(self._floor_t) < cfg.min_points:
            return None
        windows = [(cfg.window_s, cfg.confidence)]
        if 0 < cfg.short_window_s < self._floor_t[-1] - self._floor_t[0]:
            # only once the floor outgrows the short window: before, both windows hold the same points
            windows.insert(0, (cfg.short_window_s, cfg.short_confidence))
        floor = (list(self._floor_t), list(self._floor_level), list(self._floor_block))
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
        self.last = LeakEstimate(
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
