"""The cordons component: the leader's automatic cordons, the operator's cordon/uncordon, ``myolo.state.nodes``.

Decisions follow the fleet's facts (``on_applied``, ``on_liveness``): a FAIL fault or sample, or a node that
went Lost, is cordoned with the reason; WARN only with ``act_on_warn``. The record is written to the state
topic before the view shows it; an automatic cordon then tells the node to drain.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import structlog

from myolo.coordinator.commands.interface import CommandSender
from myolo.coordinator.cordons import routes, series
from myolo.coordinator.cordons.config import CordonsConfig
from myolo.coordinator.cordons.interface import AutoCordons
from myolo.coordinator.cordons.policy import (
    AUTO_ALIVE,
    AUTO_FAULT,
    AUTO_LOST,
    CordonPolicy,
    never_stopped,
    operator_by,
    shown,
)
from myolo.coordinator.cordons.records import STATE_NODES, CordonRecord
from myolo.coordinator.cordons.writer import CordonWriter, Decision
from myolo.coordinator.core.component import Component, RouteSet, StateTopic
from myolo.coordinator.core.context import Context
from myolo.coordinator.core.errors import UnknownNode
from myolo.coordinator.fleet.interface import FleetNodes, NodeState, Transition
from myolo.events.envelope import Event, event_seconds
from myolo.events.payloads import NodeFault, NodeSample
from myolo.events.payloads.commands import DrainArgs

log = structlog.get_logger("myolo.coordinator.cordons")


class Cordons(Component):
    name = "cordons"
    requires = (
        FleetNodes,
        CommandSender,
    )
    provides = (AutoCordons,)
    openapi = Path(__file__).with_name("openapi.yaml")
    config = CordonsConfig
    owns = (
        StateTopic(
            STATE_NODES,
            {"cordon": CordonRecord},
            partitions=6,
            key="node id",
            description="coordinator state: cordons, versions",
        ),
    )

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        cfg: CordonsConfig = ctx.config
        self.cfg = cfg
        self.policy = CordonPolicy(act_on_warn=cfg.act_on_warn)
        self.fleet = ctx.need(FleetNodes)
        self._commands = ctx.need(CommandSender)
        after = self._after if cfg.drain_after_auto_cordon else None
        self.writer = CordonWriter(
            ctx.store, self.fleet, ctx.clock, lambda: ctx.leadership.epoch, after, queue_size=cfg.queue_size
        )
        self.fleet.on_applied(self._on_applied)
        self.fleet.on_liveness(self._on_liveness)

    # ---- the operator's writes (CordonWrites) ---------------------------------------------------------------
    async def cordon(self, node_id: str, reason: str, by: str) -> CordonRecord:
        """An operator's cordon: recorded in the state topic (acknowledged) before it takes effect."""
        self._check(node_id)
        return await self.writer.write(node_id, True, reason.strip() or "cordoned by hand", operator_by(by))

    async def uncordon(self, node_id: str, reason: str, by: str) -> CordonRecord:
        """An operator's uncordon also lifts the drain an automatic cordon put on the node: it may get work."""
        self._check(node_id)
        rec = await self.writer.write(node_id, False, reason.strip() or "uncordoned by hand", operator_by(by))
        if self.cfg.drain_after_auto_cordon:
            await self._after(rec)
        return rec

    def cordon_automatically(self, node_id: str, reason: str, by: str) -> bool:
        """Another component's automatic cordon (AutoCordons), queued like the fault and Lost ones."""
        if not by.startswith("auto:"):
            raise ValueError(f"by: an automatic cordon's author starts with 'auto:', got {by!r}")
        return self.writer.request(node_id, reason, by)

    async def uncordon_automatically(self, node_id: str, reason: str, by: str) -> bool:
        """AutoCordons: the component that cordoned the node (a rollout's wave) lets it take work again."""
        if not by.startswith("auto:"):
            raise ValueError(f"by: an automatic uncordon's author starts with 'auto:', got {by!r}")
        self._check(node_id)
        node = self.fleet.node(node_id)
        if node is None or node.cordon is None or not node.cordoned or node.cordon.by != by:
            return False
        rec = await self.writer.write(node_id, False, reason, by)
        if self.cfg.drain_after_auto_cordon:
            await self._after(rec)
        return True

    def _check(self, node_id: str) -> None:
        self.ctx.leadership.require()
        if self.fleet.node(node_id) is None:
            raise UnknownNode(node_id)

    # ---- automatic decisions --------------------------------------------------------------------------------
    def _on_applied(self, node: NodeState, event: Event) -> None:
        if not self.ctx.leadership.is_leader:
            return
        data = event.data
        if isinstance(data, NodeFault):
            decision = self.policy.for_fault(node, data)
        elif isinstance(data, NodeSample):
            decision = self.policy.for_sample(node, data)
            if decision is None and self.cfg.auto_uncordon_lost:
                why = never_stopped(node)
                if why is not None:
                    self.writer.decide(Decision(node.node_id, why, AUTO_ALIVE, cordon=False))
                return
        else:
            return
        if decision is not None:
            self.writer.request(node.node_id, *decision, since=event_seconds(event, self.ctx.clock.now()))

    def _on_liveness(self, t: Transition) -> None:
        if self.ctx.leadership.is_leader:
            decision = self.policy.for_transition(t)
            if decision is not None:
                self.writer.request(t.node.node_id, *decision, silent_since=t.node.last_seen)

    def _sweep(self) -> int:
        """What happened while nobody led: Lost or failing nodes that are not cordoned yet."""
        queued = 0
        for node in self.fleet.nodes():
            if node.cordoned:
                continue
            if node.liveness == "Lost":
                queued += self.writer.request(
                    node.node_id, "Lost (found when this term started)", AUTO_LOST, silent_since=node.last_seen
                )
            elif self.policy.acts_on(node.health):
                why = "; ".join(node.health_reasons) or "no reason given"
                queued += self.writer.request(node.node_id, f"{node.health.upper()} health: {why}", AUTO_FAULT)
        return queued

    async def _after(self, rec: CordonRecord) -> None:
        """An automatic cordon also tells the node to drain (no new trainer workers), with the reason; an
        automatic uncordon lifts that drain."""
        try:
            await self._commands.issue(rec.node_id, DrainArgs(draining=rec.cordoned, reason=rec.reason))
        except Exception as exc:  # not leading any more, or Kafka away: the cordon stands; log and go on
            log.warning("drain command not sent", node=rec.node_id, error=str(exc))

    # ---- hooks ----------------------------------------------------------------------------------------------
    def on_state(self, topic: str, key: str, record: msgspec.Struct | None, kind: str) -> None:
        if record is None:
            self.fleet.clear_cordon(key)
        elif isinstance(record, CordonRecord):
            node = self.fleet.node(record.node_id)
            if node is None or node.cordon is None or record.time >= node.cordon.time:  # our own echo may lag
                self.fleet.set_cordon(shown(record))

    async def on_lead(self, epoch: int) -> None:
        log.info("cordons resumed", epoch=epoch, queued=self._sweep())

    async def tick(self, now: float) -> None:
        if self.ctx.leadership.is_leader:
            self.writer.requeue_deferred()

    def background(self) -> dict[str, Any]:
        return {"cordon-writer": self.writer.run}

    def api(self) -> RouteSet:
        return RouteSet(routes.routes(self), self.openapi)

    def stats(self) -> dict[str, int]:
        return {"cordons_written": self.writer.cordons_written, "cordons_deferred": self.writer.deferred_total}

    def metrics(self) -> dict[str, Any]:
        return series.series(self.fleet.nodes(), self.writer.latency)
