"""Carrying out cordon decisions: the record goes to the state topic (acknowledged), then into the view.

Automatic decisions are queued and written by one worker, so the ingest loop never waits on Kafka and a
broker hiccup delays a cordon instead of dropping the event that caused it. A node with a decision in
flight is not queued twice, and the queue is bounded: a request that finds it full is kept in a set and
queued again on the next tick, so memory stays bounded and no decision is dropped. Once an automatic cordon
is recorded, ``after`` runs (the component sends the node a signed ``drain``, or lifts it after an automatic
uncordon).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from myolo.common.clock import Clock
from myolo.common.metrics.histogram import Histogram
from myolo.common.metrics.mapping import load
from myolo.coordinator.cordons.policy import AUTO_LOST, record, shown
from myolo.coordinator.cordons.records import STATE_NODES, CordonRecord
from myolo.coordinator.fleet.interface import FleetNodes
from myolo.coordinator.state import StateStore

log = structlog.get_logger("myolo.coordinator.cordons")
LATENCY_METRIC = "myolo_fault_to_cordon_seconds"


@dataclass(frozen=True)
class Decision:
    """An automatic decision: cordon (or lift an automatic cordon of) ``node_id``, why, by which rule."""

    node_id: str
    reason: str
    by: str
    cordon: bool = True
    silent_since: float | None = None
    since: float | None = None  # the fault's own time (the node's clock): measured to the cordon's write


class CordonWriter:
    def __init__(
        self,
        store: StateStore,
        fleet: FleetNodes,
        clock: Clock,
        epoch: Callable[[], int | None],
        after: Callable[[CordonRecord], Awaitable[object]] | None = None,
        *,
        queue_size: int = 10_000,
    ) -> None:
        self._store = store
        self._after = after
        self._fleet = fleet
        self._clock = clock
        self._epoch = epoch
        self._queue: asyncio.Queue[Decision] = asyncio.Queue(maxsize=queue_size)
        self._in_flight: set[str] = set()
        self._deferred: dict[str, Decision] = {}
        self.cordons_written = 0
        self.deferred_total = 0
        self.latency = Histogram(load().by_name()[LATENCY_METRIC].buckets)  # fault -> cordon written, seconds

    @property
    def queued(self) -> int:
        return self._queue.qsize() + len(self._deferred)

    def request(
        self, node_id: str, reason: str, by: str, *, silent_since: float | None = None, since: float | None = None
    ) -> bool:
        """Queue an automatic cordon. False when a decision for this node is already on its way."""
        return self.decide(Decision(node_id, reason, by, silent_since=silent_since, since=since))

    def decide(self, decision: Decision) -> bool:
        node_id = decision.node_id
        if node_id in self._in_flight or node_id in self._deferred:
            return False
        try:
            self._queue.put_nowait(decision)
        except asyncio.QueueFull:
            self._deferred[node_id] = decision
            self.deferred_total += 1
            log.warning("cordon queue full: decision deferred to the next tick", node=node_id, reason=decision.reason)
            return True
        self._in_flight.add(node_id)
        return True

    def requeue_deferred(self) -> int:
        """Move deferred decisions into the queue as far as it has room. Returns how many moved."""
        moved = 0
        for node_id in list(self._deferred):
            if self._queue.full():
                break
            self._queue.put_nowait(self._deferred.pop(node_id))
            self._in_flight.add(node_id)
            moved += 1
        return moved

    async def write(
        self, node_id: str, cordoned: bool, reason: str, by: str, silent_since: float | None = None
    ) -> CordonRecord:
        """Write a cordon (or uncordon) record, then apply it. Raises if no longer leading."""
        epoch = self._epoch()
        if epoch is None:
            raise RuntimeError("not leading")
        rec = record(node_id, cordoned, reason, by, self._clock.now(), epoch, silent_since)
        await self._store.put(STATE_NODES, node_id, rec)
        self._fleet.set_cordon(shown(rec))
        self.cordons_written += 1
        log.info("cordon" if cordoned else "uncordon", node=node_id, reason=reason, by=by, epoch=epoch)
        return rec

    async def run(self) -> None:
        while True:
            decision = await self._queue.get()
            try:
                await self._auto(decision)
            finally:
                self._in_flight.discard(decision.node_id)

    def _still_wanted(self, d: Decision) -> bool:
        """Decided meanwhile (by the operator, or replayed from the state)? Then leave it."""
        node = self._fleet.node(d.node_id)
        if d.cordon:
            return node is None or not node.cordoned
        return node is not None and node.cordoned and node.cordon is not None and node.cordon.by == AUTO_LOST

    async def _auto(self, d: Decision) -> None:
        delay = 0.1
        while self._epoch() is not None and self._still_wanted(d):
            try:
                rec = await self.write(d.node_id, d.cordon, d.reason, d.by, d.silent_since)
            except Exception as exc:  # Kafka away: keep the decision, try again, never lose it silently
                log.warning("cordon write failed, retrying", node=d.node_id, error=str(exc), retry_in_s=delay)
                await self._clock.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            if d.cordon and d.since is not None:
                self.latency.observe(max(0.0, rec.time - d.since))
            if self._after is not None:
                await self._after(rec)  # e.g. tell the node to drain: the command path retries on its own
            return
