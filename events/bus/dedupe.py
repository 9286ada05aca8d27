"""A bounded memory of recently seen event ids, to drop duplicates that at-least-once delivery produces."""

from __future__ import annotations

from collections import OrderedDict


class RecentIds:
    """The last ``capacity`` ids seen, oldest forgotten first. O(1) per check."""

    def __init__(self, capacity: int = 100_000) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self._ids: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, event_id: str) -> bool:
        return event_id in self._ids

    def add(self, event_id: str) -> None:
        self._ids[event_id] = None
        self._ids.move_to_end(event_id)
        if len(self._ids) > self.capacity:
            self._ids.popitem(last=False)

    def __len__(self) -> int:
        return len(self._ids)
