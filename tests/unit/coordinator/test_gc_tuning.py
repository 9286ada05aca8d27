"""The coordinator's collector settings: what exists is frozen, the young threshold only ever goes up."""

from __future__ import annotations

import gc

from myolo.coordinator.core.gc_tuning import YOUNG_THRESHOLD, tune_gc


def test_tune_gc_freezes_and_raises_the_young_threshold_only() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        assert tune_gc() == (YOUNG_THRESHOLD, 10, 10)
        assert gc.get_freeze_count() > 0
        gc.set_threshold(50_000, 10, 10)
        assert tune_gc()[0] == 50_000  # a higher setting of the operator's is kept
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
