"""Carrying out cordon decisions: the record goes to the state topic (acknowledged), then into the view.

Automatic decisions are queued and written by one worker, so the ingest loop never waits on Kafka and a
broker hiccup delays a cordon instead of dropping the event that caused it. A node with a decision in
flight is not queued twice. Once an automatic cordon is recorded, ``after_auto_cordon`` runs (the service
sends the node a signed ``drain`` command: its agent stops taking new work).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from coordinator.fleet.model import CordonRecord
from coordinator.fleet.view import FleetView
from coordinator.reactions.cordon import record
from coordinator.state.store import StateStore
from events.clock import Clock
from events.topics import STATE_NODES

log = structlog.get_logger("myolo.coordinator.reactions")


class Reactor:
    def __init__(
        self,
        store: StateStore,
        view: FleetView,
        clock: Clock,
        epoch: Callable[[], int | None],
        after_auto_cordon: Callable[[CordonRecord], Awaitable[object]] | None = None,
    ) -> None:
        self._store = store
        self._after = after_auto_cordon
        self._view = view
        self._clock = clock
        self._epoch = epoch
        self._queue: asyncio.Queue[tuple[str, str, str]] = asyncio.Queue()
        self._in_flight: set[str] = set()
        self.cordons_written = 0

    def request(self, node_id: str, reason: str, by: str) -> bool:
        """Queue an automatic cordon. False when one for this node is already on its way."""
        if node_id in self._in_flight:
            return False
        self._in_flight.add(node_id)
        self._queue.put_nowait((node_id, reason, by))
        return True

    async def write(self, node_id: str, cordoned: bool, reason: str, by: str) -> CordonRecord:
        """Write a cordon (or uncordon) record, then apply it. Raises if no longer leading."""
        epoch = self._epoch()
        if epoch is None:
            raise RuntimeError("not leading")
        rec = record(node_id, cordoned, reason, by, self._clock.now(), epoch)
        await self._store.put(STATE_NODES, node_id, rec)
        self._view.set_cordon(rec, self._clock.now())
        self.cordons_written += 1
        log.info("cordon" if cordoned else "uncordon", node=node_id, reason=reason, by=by, epoch=epoch)
        return rec

    async def run(self) -> None:
        while True:
            node_id, reason, by = await self._queue.get()
            try:
                await self._auto(node_id, reason, by)
            finally:
                self._in_flight.discard(node_id)

    async def _auto(self, node_id: str, reason: str, by: str) -> None:
        delay = 0.1
        while self._epoch() is not None:
            node = self._view.node(node_id)
            if node is not None and node.cordoned:
                return  # decided meanwhile (by the operator, or replayed from the state)
            try:
                rec = await self.write(node_id, True, reason, by)
            except Exception as exc:  # Kafka away: keep the decision, try again, never lose it silently
                log.warning("cordon write failed, retrying", node=node_id, error=str(exc), retry_in_s=delay)
                await self._clock.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            if self._after is not None:
                await self._after(rec)  # e.g. tell the node to drain: the command path retries on its own
            return
