"""Simulated time wakes sleepers in order; the duplicate window forgets the oldest ids first."""

from __future__ import annotations

import asyncio

from myolo.common.clock import SimClock
from myolo.events.bus.dedupe import RecentIds


async def test_sim_clock_plays_an_hour_of_ticks_instantly() -> None:
    clock = SimClock()
    ticks: list[float] = []

    async def loop() -> None:
        while True:
            ticks.append(clock.monotonic())
            await clock.sleep(1.0)

    task = asyncio.create_task(loop())
    await asyncio.sleep(0)
    await clock.advance(3600)
    task.cancel()
    assert len(ticks) == 3601
    assert ticks[:3] == [0.0, 1.0, 2.0] and ticks[-1] == 3600.0


async def test_sleepers_wake_in_time_order() -> None:
    clock = SimClock()
    order: list[str] = []

    async def sleeper(name: str, s: float) -> None:
        await clock.sleep(s)
        order.append(name)

    tasks = [asyncio.create_task(sleeper(n, s)) for n, s in (("c", 30), ("a", 10), ("b", 20))]
    await asyncio.sleep(0)
    await clock.advance(15)
    assert order == ["a"]
    await clock.advance(100)
    assert order == ["a", "b", "c"]
    await asyncio.gather(*tasks)
    assert clock.now() - 1_767_225_600.0 == 115


def test_recent_ids_is_bounded() -> None:
    seen = RecentIds(capacity=3)
    for i in range(5):
        seen.add(str(i))
    assert len(seen) == 3
    assert "0" not in seen and "1" not in seen and "4" in seen


def test_recent_ids_is_bounded_in_bytes_too() -> None:
    """Long ids fill the byte budget long before the count: the window holds what fits, newest first."""
    seen = RecentIds(capacity=100_000, max_bytes=100_000)
    for i in range(1000):
        seen.add(f"{i:04d}" + "x" * 252)  # the longest id the contract allows
    assert seen.bytes <= 100_000 and 150 < len(seen) < 300
    assert "0999" + "x" * 252 in seen and "0000" + "x" * 252 not in seen
    seen.add("0999" + "x" * 252)  # seen again: counted once
    assert seen.bytes <= 100_000


def test_event_ids_are_unique_and_a_forked_child_never_repeats_its_parent() -> None:
    import os

    from myolo.events.envelope import new_id

    ids = [new_id() for _ in range(5000)]
    assert len(set(ids)) == 5000 and all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    new_id()  # the pool holds ids the child must not hand out again
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next ids and leave at once
        os.write(w, " ".join(new_id() for _ in range(300)).encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    with os.fdopen(r) as f:
        child = set(f.read().split())
    parent = {new_id() for _ in range(300)}
    assert len(child) == 300 and not child & parent
