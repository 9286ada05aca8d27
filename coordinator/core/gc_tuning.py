"""Garbage collection for a process that holds a large long-lived view and makes many short-lived objects.

CPython collects its youngest generation every 700 net allocations, and every older collection walks each
tracked object it holds. A coordinator keeps thousands of nodes' latest samples (tens of thousands of tracked
objects) while ingest makes and drops a sample's worth of objects per record, so default thresholds spend
about a tenth of ingest in the collector. Everything made before ingest starts (modules, config, replayed
state) is frozen out of collections, and the youngest generation is collected every 20,000 allocations.
Cycles are still collected; they only live a little longer.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000


def tune_gc() -> tuple[int, int, int]:
    """Freeze what exists now and raise the youngest threshold (never lower it); returns the thresholds set."""
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)
    return gc.get_threshold()
