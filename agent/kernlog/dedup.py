"""One fault per XID, whether NVML's event or the kernel's line tells of it first.

Both paths report the same XID on the same GPU within moments of each other. Whichever comes first is
published; the other source's report of the same code on the same GPU (by PCI address) within ``window_s`` on
the agent's clock is its echo and is dropped. Reports pair one to one, and a source's own repeats are never
dropped: an XID the driver raises twice is two faults (health counts repeats). Memory is bounded: reports
older than the window are pruned and at most ``max_entries`` are kept.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Literal

DEFAULT_WINDOW_S = 30.0
MAX_ENTRIES = 4096
Source = Literal["nvml", "kernel"]


class XidDedup:
    def __init__(self, window_s: float = DEFAULT_WINDOW_S, max_entries: int = MAX_ENTRIES) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s: {window_s} must be > 0 (seconds within which two reports are one XID)")
        self.window_s = window_s
        self.max_entries = max_entries
        self.dropped = 0
        self._size = 0
        # (bus, xid) -> reports not yet matched by the other source: (time, source), oldest first
        self._open: OrderedDict[tuple[str, int], deque[tuple[float, Source]]] = OrderedDict()

    def first(self, source: Source, bus: str | None, xid: int, now: float) -> bool:
        """True to publish this report; False when it echoes the other source's report of the same XID on the
        same GPU within the window. A GPU whose address is unknown cannot be matched: always True."""
        self._prune(now)
        if bus is None:
            return True
        key = (bus, xid)
        pending = self._open.get(key)
        if pending:
            for i, (_, seen_by) in enumerate(pending):
                if seen_by != source:
                    del pending[i]
                    self._size -= 1
                    self.dropped += 1
                    if not pending:
                        del self._open[key]
                    return False
        self._open.setdefault(key, deque()).append((now, source))
        self._open.move_to_end(key)
        self._size += 1
        while self._size > self.max_entries:
            oldest_key, oldest = next(iter(self._open.items()))
            oldest.popleft()
            self._size -= 1
            if not oldest:
                del self._open[oldest_key]
        return True

    def _prune(self, now: float) -> None:
        for key in list(self._open):
            pending = self._open[key]
            while pending and now - pending[0][0] > self.window_s:
                pending.popleft()
                self._size -= 1
            if not pending:
                del self._open[key]
