"""One clock for agent and coordinator, so tests can play hours of cluster life in seconds.

Every piece of code that needs "now" or wants to wait takes a :class:`Clock`. Production uses
:class:`SystemClock`; tests use :class:`SimClock`, whose time only moves when the test says so
(``advance``) or, with ``auto_advance``, jumps straight to the next timer whenever every task is waiting on
it. Nothing in a test ever sleeps on the wall clock to see time-dependent behaviour.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """What agent and coordinator may ask of time."""

    def now(self) -> float:
        """Seconds since the Unix epoch (wall time, for timestamps in events)."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin that never goes back (for intervals and timeouts)."""

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class SimClock:
    """Simulated time: starts at ``start`` and moves only through :meth:`advance` (or auto-advance).

    Sleepers are kept in a heap by wake-up time; ``advance`` wakes them in order, letting each woken task run
    before the clock moves on, so periodic loops see every tick they would have seen in real time.
    """

    def __init__(self, start: float = 1_767_225_600.0) -> None:  # 2026-01-01T00:00:00Z
        self._origin = start
        self._t = 0.0
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._origin + self._t

    def monotonic(self) -> float:
        return self._t

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._timers, (self._t + seconds, next(self._seq), fut))
        try:
            await fut
        finally:
            if not fut.done():
                fut.cancel()

    def pending(self) -> int:
        """Number of tasks waiting on this clock."""
        return sum(1 for _, _, f in self._timers if not f.done())

    async def advance(self, seconds: float, settle: int = 5) -> None:
        """Move time forward by ``seconds``, waking due sleepers in time order.

        After each wake-up the event loop runs ``settle`` rounds so woken tasks can do their work (and
        schedule their next sleep) before time moves on.
        """
        target = self._t + seconds
        while self._timers and self._timers[0][0] <= target:
            when, _, fut = heapq.heappop(self._timers)
            if fut.done():
                continue
            self._t = max(self._t, when)
            fut.set_result(None)
            for _ in range(settle):
                await asyncio.sleep(0)
        self._t = target
        for _ in range(settle):
            await asyncio.sleep(0)

    async def run_for(self, seconds: float, step: float = 1.0) -> None:
        """Advance in ``step``-sized increments: handy for loops that also await I/O between ticks."""
        end = self._t + seconds
        while self._t < end:
            await self.advance(min(step, end - self._t))


async def sleep_or_wake(clock: Clock, seconds: float, event: asyncio.Event) -> bool:
    """Wait ``seconds`` of ``clock`` time, or less when ``event`` is (or becomes) set. True when it is set.

    For loops that wait out an interval or a back-off but must react at once to a stop or a new request. The
    event is left as it is: a caller that wants to be woken again clears it.
    """
    if not event.is_set():
        sleeper = asyncio.ensure_future(clock.sleep(seconds))
        waiter = asyncio.ensure_future(event.wait())
        try:
            await asyncio.wait([sleeper, waiter], return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waiter.cancel()
    return event.is_set()
