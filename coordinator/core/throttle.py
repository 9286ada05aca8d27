"""Logging what hostile input causes without letting a flood of it flood the log (or the CPU)."""

from __future__ import annotations

from dataclasses import dataclass

from events.clock import Clock


@dataclass
class Throttle:
    """At most ``burst`` log lines per ``window_s`` of the clock; the rest are counted and reported with the
    next line that is let through, so the log says how much it left out."""

    clock: Clock
    window_s: float = 10.0
    burst: int = 10
    _window_start: float = float("-inf")
    _in_window: int = 0
    suppressed: int = 0

    def allow(self) -> int | None:
        """None: stay quiet. Otherwise log now, adding the returned count of lines left out since the last."""
        now = self.clock.monotonic()
        if now - self._window_start >= self.window_s:
            self._window_start, self._in_window = now, 0
        if self._in_window >= self.burst:
            self.suppressed += 1
            return None
        self._in_window += 1
        left_out, self.suppressed = self.suppressed, 0
        return left_out
