"""The leak detector's settings: the ``[leak]`` section of ``agent.toml`` (``MYOLO_LEAK_*``).

``enabled``, ``threshold_pct_per_h`` and ``report_interval_s`` are the operator's; the rest tune the estimator
(``series.py`` says what each step does) and were chosen with ``tests/benchmarks/bench_leak.py``: change them
only with that benchmark's figures side by side. Imports no numpy, so reading the configuration stays cheap.
"""

from __future__ import annotations

import msgspec

# two-sided normal quantiles of the confidence levels the trend's interval supports
Z_TWO_SIDED = {0.80: 1.2816, 0.90: 1.6449, 0.95: 1.9600, 0.98: 2.3263, 0.99: 2.5758, 0.999: 3.2905}


class LeakConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Memory-leak detection over per-GPU, per-process GPU and host RSS series. Checked when built (from the
    file or in code): an impossible value raises ``ValueError`` naming ``leak.<option>``."""

    enabled: bool = True
    threshold_pct_per_h: float = 0.1  # alert when the growth's lower confidence bound exceeds this
    report_interval_s: float = 300.0  # a LeakReport per series this often, and at once when an alert flips
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

    def __post_init__(self) -> None:
        confidences = f"one of {sorted(Z_TWO_SIDED)}"
        checks = [
            ("threshold_pct_per_h", self.threshold_pct_per_h > 0, "> 0"),
            ("report_interval_s", self.report_interval_s > 0, "> 0"),
            ("confidence", self.confidence in Z_TWO_SIDED, confidences),
            ("short_confidence", self.short_confidence in Z_TWO_SIDED, confidences),
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
        ]
        for name, ok, want in checks:
            if not ok:
                raise ValueError(f"leak.{name} must be {want}, got {getattr(self, name)!r}")
