"""``sleep_or_wake``: a wait on the shared clock that an event cuts short."""

from __future__ import annotations

import asyncio

from myolo.common.clock import SimClock, sleep_or_wake


async def started(clock: SimClock) -> None:
    """Let the waiting task run until its timer is on the clock."""
    for _ in range(100):
        if clock.pending():
            return
        await asyncio.sleep(0)
    raise AssertionError("sleep_or_wake never waited on the clock")


async def test_sleeps_the_full_time_on_the_clock_when_nobody_wakes_it() -> None:
    clock, event = SimClock(), asyncio.Event()
    task = asyncio.create_task(sleep_or_wake(clock, 10.0, event))
    await started(clock)
    await clock.advance(9.9)
    assert not task.done()
    await clock.advance(0.1)
    assert await asyncio.wait_for(task, 30) is False  # a hang guard: the clock has reached the end
    assert clock.pending() == 0


async def test_the_event_ends_the_wait_at_once_and_leaves_no_timer_behind() -> None:
    clock, event = SimClock(), asyncio.Event()
    task = asyncio.create_task(sleep_or_wake(clock, 3600.0, event))
    await started(clock)
    await clock.advance(1.0)
    event.set()
    assert await asyncio.wait_for(task, 30) is True  # a hang guard: the clock does not move
    assert clock.monotonic() == 1.0 and clock.pending() == 0
    assert event.is_set()  # left for the caller to clear


async def test_an_event_already_set_returns_without_waiting() -> None:
    clock, event = SimClock(), asyncio.Event()
    event.set()
    assert await sleep_or_wake(clock, 3600.0, event) is True
    assert clock.pending() == 0
