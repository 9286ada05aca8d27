"""A bounded memory of recently seen event ids, to drop duplicates that at-least-once delivery produces."""

from __future__ import annotations

import sys
from collections import OrderedDict

from myolo.events.limits import DEDUPE_WINDOW_BYTES, DEDUPE_WINDOW_IDS

ENTRY_OVERHEAD_BYTES = 100
"""What an OrderedDict entry costs besides its key string, rounded up from CPython 3.11's size of one."""


class RecentIds:
    """The last ids seen, oldest forgotten first, within ``capacity`` ids and ``max_bytes`` of memory
    (the id strings and their entries), so neither many ids nor long ones can grow it. O(1) per check."""

    def __init__(self, capacity: int = DEDUPE_WINDOW_IDS, max_bytes: int = DEDUPE_WINDOW_BYTES) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        if max_bytes < 1:
            raise ValueError("max_bytes must be >= 1")
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.bytes = 0
        self._ids: OrderedDict[str, int] = OrderedDict()

    def __contains__(self, event_id: str) -> bool:
        return event_id in self._ids

    def add(self, event_id: str) -> None:
        if event_id in self._ids:
            self._ids.move_to_end(event_id)
            return
        size = sys.getsizeof(event_id) + ENTRY_OVERHEAD_BYTES
        self._ids[event_id] = size
        self.bytes += size
        while len(self._ids) > self.capacity or (self.bytes > self.max_bytes and len(self._ids) > 1):
            self.bytes -= self._ids.popitem(last=False)[1]

    def __len__(self) -> int:
        return len(self._ids)
