"""At most one fresh GPU read per ``min_interval_s`` behind ``POST /healthcheck``, however many callers ask.

The active check reads every GPU; on NVML that is a driver call in a thread, which can take seconds on a sick
node and which the telemetry loop needs too. Unbounded, a loop of POSTs from anyone who reaches the port would
pile reads onto the driver. So callers that arrive while a read runs share it, and callers within the interval
after a read get the report as it stands (the read's result is in it), told how old the read is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from myolo.agent.endpoint.checks import HealthReport
from myolo.common.clock import Clock


@dataclass(frozen=True)
class ActiveAnswer:
    report: HealthReport
    fresh: bool  # the GPUs were read for this request (alone or shared with concurrent ones)
    read_age_s: float  # how long ago the read this report rests on finished (0 when fresh)


class ActiveCheck:
    """``await check()``: the answer to one ``POST /healthcheck``."""

    def __init__(
        self,
        read: Callable[[], Awaitable[HealthReport]],
        current: Callable[[], HealthReport],
        clock: Clock,
        min_interval_s: float,
    ) -> None:
        self._read, self._current, self._clock = read, current, clock
        self.min_interval_s = min_interval_s
        self._running: asyncio.Task[HealthReport] | None = None
        self._last: float | None = None  # clock.monotonic() when the last read finished
        self.reads = 0  # reads started since start (what the limit bounds)

    async def __call__(self) -> ActiveAnswer:
        if self._running is None and self._last is not None:
            age = self._clock.monotonic() - self._last
            if age < self.min_interval_s:
                return ActiveAnswer(self._current(), fresh=False, read_age_s=age)
        if self._running is None:
            self.reads += 1
            self._running = asyncio.ensure_future(self._read())
            self._running.add_done_callback(self._finished)
        # shielded: a caller that hangs up does not cancel the read the others wait on
        return ActiveAnswer(await asyncio.shield(self._running), fresh=True, read_age_s=0.0)

    def _finished(self, _task: asyncio.Task[HealthReport]) -> None:
        self._running = None
        self._last = self._clock.monotonic()
