"""Background tasks an object starts and must account for: kept until done, failures logged, never lost.

Why: ``asyncio`` holds only a weak reference to a task, so one nobody keeps may vanish mid-run, and an
exception in one nobody awaits is reported only at garbage collection, if ever.
"""

from __future__ import annotations

import asyncio
from typing import Any


class TaskSet:
    def __init__(self, logger: Any, what: str) -> None:
        self._log = logger
        self._what = what
        self.tasks: set[asyncio.Future] = set()

    def add(self, task: asyncio.Future) -> asyncio.Future:
        self.tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Future) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            name = task.get_name() if isinstance(task, asyncio.Task) else None
            self._log.error(f"{self._what} ended with an error", task=name, exc_info=task.exception())

    async def drain(self) -> None:
        """Wait until every task is done (including tasks added meanwhile)."""
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)

    async def cancel(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await self.drain()

    def __len__(self) -> int:
        return len(self.tasks)
