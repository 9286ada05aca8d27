"""Theil-Sen with Sen's interval, jump segmentation, serial-correlation inflation."""

from __future__ import annotations

import numpy as np
import pytest

from myolo.agent.leak.estimate import segments_from_jumps, serial_inflation, theil_sen


def test_exact_line_gives_its_slope_and_a_tight_interval() -> None:
    t = np.arange(20.0)
    trend = theil_sen(t, 3.0 + 0.25 * t)
    assert trend is not None
    assert trend.slope == pytest.approx(0.25) and trend.lower == pytest.approx(0.25)
    assert trend.upper == pytest.approx(0.25) and trend.pairs == 190 and trend.mk_z > 5


def test_outliers_barely_move_the_slope() -> None:
    rng = np.random.default_rng(1)
    t = np.arange(60.0)
    y = 0.1 * t + rng.normal(0, 0.05, 60)
    y[[5, 17, 40]] += [30.0, -25.0, 50.0]
    trend = theil_sen(t, y)
    assert trend is not None and trend.slope == pytest.approx(0.1, abs=0.005)


def test_interval_covers_true_slope_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(7)
    t = np.arange(30.0)
    hits = 0
    trials = 400
    for _ in range(trials):
        trend = theil_sen(t, 0.02 * t + rng.standard_t(4, 30))
        assert trend is not None
        hits += trend.lower <= 0.02 <= trend.upper
    assert 0.92 <= hits / trials <= 0.99


def test_level_shift_is_not_a_trend_once_segmented() -> None:
    rng = np.random.default_rng(3)
    t = np.arange(40.0)
    y = rng.normal(0, 0.01, 40)
    y[20:] += 1.0
    seg = segments_from_jumps(y, min_jump=0.15)
    assert seg == [0] * 20 + [1] * 20
    unsegmented, segmented = theil_sen(t, y), theil_sen(t, y, seg)
    assert unsegmented is not None and segmented is not None
    assert unsegmented.upper > 0.02  # the step drags the plain estimate up
    assert abs(segmented.slope) < 0.002 and segmented.lower < 0 < segmented.upper


def test_a_steady_rise_is_never_cut_into_jumps() -> None:
    y = 0.5 * np.arange(50.0)  # steps far above min_jump, but all alike: a trend, not shifts
    assert max(segments_from_jumps(y, min_jump=0.15)) == 0


def test_serial_inflation_grows_with_smoothing() -> None:
    rng = np.random.default_rng(5)
    t = np.arange(48.0)
    white = rng.normal(0, 1, 48 + 9)
    smooth = np.convolve(white, np.ones(10) / 10, mode="valid")
    assert serial_inflation(t, white[:48], 0.0, 9) < 2.0
    assert serial_inflation(t, smooth, 0.0, 9) > 3.0
    assert serial_inflation(t, smooth, 0.0, 0) == 1.0


def test_bad_confidence_is_named() -> None:
    with pytest.raises(ValueError, match="confidence"):
        theil_sen(np.arange(5.0), np.arange(5.0), confidence=0.97)


def test_too_few_points() -> None:
    assert theil_sen(np.arange(2.0), np.arange(2.0)) is None
