"""Hand GPU events from any thread to the agent's asyncio loop.

NVML's ``nvmlEventSetWait`` blocks, so it runs in its own thread; the simulator injects from the loop's own
thread. Both go through :class:`EventBridge`, which puts onto an ``asyncio.Queue`` safely from either side,
so a fault reaches the publisher at once rather than at the next sample tick.
"""

from __future__ import annotations

import asyncio

import structlog

from myolo.agent.gpu.backend import GpuEvent

log = structlog.get_logger("myolo.agent.gpu")


class EventBridge:
    """An asyncio queue plus a thread-safe ``put``. Bounded so a storm of events cannot grow memory:
    when full, the oldest event is dropped and counted (the health state keeps the sticky verdicts)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, maxsize: int = 1024) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[GpuEvent] = asyncio.Queue(maxsize=maxsize)
        self.dropped = 0
        self._loop_thread: int | None = None
        self.closed = False

    def put(self, event: GpuEvent) -> bool:
        """Deliver ``event``; returns False once the loop is gone (the caller should stop producing)."""
        if self.closed or self.loop.is_closed():
            return False
        if self._on_loop_thread():
            self._put_now(event)
            return True
        try:
            self.loop.call_soon_threadsafe(self._put_now, event)
        except RuntimeError:  # loop closed between the check and the call
            return False
        return True

    def close(self) -> None:
        self.closed = True

    def _on_loop_thread(self) -> bool:
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    def _put_now(self, event: GpuEvent) -> None:
        if self.queue.full():
            self.queue.get_nowait()
            self.dropped += 1
            log.warning("gpu event queue full: dropped the oldest event", dropped=self.dropped)
        self.queue.put_nowait(event)


def resolve_loop(loop: asyncio.AbstractEventLoop | None) -> asyncio.AbstractEventLoop:
    """The loop to deliver to: the given one, else the running one, with a clear error otherwise."""
    if loop is not None:
        return loop
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError("start_events() needs an asyncio loop: call it from a coroutine or pass loop=...") from None
