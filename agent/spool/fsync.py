"""When a spool fsyncs: ``always`` after every append, ``interval`` at most every ``interval_s`` while
something written is not yet synced, ``never`` (left to the kernel; an OS crash may lose the last seconds)."""

from __future__ import annotations

from typing import Literal

from myolo.common.clock import Clock

FsyncPolicy = Literal["always", "interval", "never"]


class FsyncSchedule:
    """``dirty`` is set by whoever writes and cleared by whoever fsyncs; :meth:`due` is the interval rule."""

    def __init__(self, policy: FsyncPolicy, interval_s: float, clock: Clock) -> None:
        self.policy = policy
        self.interval_s = interval_s
        self.dirty = False
        self._clock = clock
        self._last = clock.monotonic()

    def due(self) -> bool:
        return self.policy == "interval" and self.dirty and self._clock.monotonic() - self._last >= self.interval_s

    def synced(self) -> None:
        self._last = self._clock.monotonic()
