"""Glue: lines from a follower or a pipe, through a tracker, out to the publisher."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, Awaitable, Callable

from myolo.agent.nccl.tracker import NcclTracker
from myolo.common.clock import Clock
from myolo.events.payloads import NcclReport, NodeFault

Emit = Callable[[NcclReport | NodeFault], Awaitable[None] | None]


async def watch_lines(lines: AsyncIterable[str], tracker: NcclTracker, emit: Emit, clock: Clock) -> int:
    """Feed every line to ``tracker`` and hand each resulting payload to ``emit`` at once (a fault must not
    wait for the next sample tick). Returns the number of payloads emitted when the lines end."""
    emitted = 0
    async for line in lines:
        for payload in tracker.feed(line, clock.now()):
            result = emit(payload)
            if inspect.isawaitable(result):
                await result
            emitted += 1
    return emitted
