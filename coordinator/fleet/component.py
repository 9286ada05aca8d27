"""The fleet component: every node's latest state from the agents' events, and its liveness on each tick.

Other components learn of changes through ``on_applied`` and ``on_liveness`` (cordons decides from them);
a node that just went Suspect is asked for a full sample through the commands component.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import structlog

from myolo.coordinator.commands.interface import CommandSender, SentCommand
from myolo.coordinator.core.component import Component, RouteSet
from myolo.coordinator.core.context import Context
from myolo.coordinator.core.dashboard import Dashboard, Panel
from myolo.coordinator.core.errors import Invalid, UnknownNode
from myolo.coordinator.fleet import dashboard, liveness, routes, series
from myolo.coordinator.fleet.config import FleetConfig
from myolo.coordinator.fleet.interface import Applied, Changed, FleetNodes
from myolo.coordinator.fleet.model import Cordon, NodeState
from myolo.coordinator.fleet.routes import INTERVAL_HINT
from myolo.coordinator.fleet.view import FleetView
from myolo.events.bus import RecordInfo
from myolo.events.envelope import Event
from myolo.events.limits import Throttle
from myolo.events.payloads import BandwidthReport, LeakReport, NcclReport, NodeFault, NodeSample
from myolo.events.payloads.commands import ReportSampleArgs, SetIntervalArgs

log = structlog.get_logger("myolo.coordinator.fleet")


class Fleet(Component):
    name = "fleet"
    requires = (CommandSender,)
    provides = (FleetNodes,)
    openapi = Path(__file__).with_name("openapi.yaml")
    config = FleetConfig
    consumes = (NodeSample, NodeFault, NcclReport, BandwidthReport, LeakReport)

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        cfg: FleetConfig = ctx.config
        self.cfg = cfg
        self.view = FleetView(stale_after_s=cfg.lost_after_s, max_nodes=cfg.max_nodes)
        self.policy = liveness.LivenessPolicy(cfg.lost_after_s, cfg.suspect_after_intervals)
        self._sender = ctx.need(CommandSender)
        self._commands = self._sender if cfg.request_sample_on_suspect else None
        self._applied: list[Applied] = []
        self._changed: list[Changed] = []
        self._flag_log = Throttle(ctx.clock)
        self.listener_errors = 0
        self._asking: set[str] = set()  # nodes a sample request is on its way to
        self._requests: set[asyncio.Task] = set()
        self.hold: str | None = None  # why Lost verdicts are held back right now
        self._all_silent_since: float | None = None
        self._in_trouble = False  # the last tick found Kafka not answering (or ingest lagging)
        self._trouble_ended: float | None = None  # when it answered again

    # ---- FleetNodes -----------------------------------------------------------------------------------------
    def now(self) -> float:
        return self.ctx.clock.now()

    def node(self, node_id: str) -> NodeState | None:
        return self.view.node(node_id)

    def nodes(self) -> tuple[NodeState, ...]:
        return tuple(self.view.nodes())

    def set_cordon(self, cordon: Cordon) -> None:
        self.view.set_cordon(cordon, self.ctx.clock.now())

    def clear_cordon(self, node_id: str) -> None:
        self.view.clear_cordon(node_id)

    def on_applied(self, listener: Applied) -> None:
        self._applied.append(listener)

    def on_liveness(self, listener: Changed) -> None:
        self._changed.append(listener)

    # ---- hooks ----------------------------------------------------------------------------------------------
    async def on_event(self, event: Event, info: RecordInfo) -> None:
        applied = self.view.apply(event, self.ctx.clock.now())
        if applied.rejected is not None:
            self._flag_log.warn(
                log,
                "event flagged",
                type=event.type,
                key=event.key,
                reason=applied.rejected,
                topic=info.topic,
                flagged_total=self.view.rejected_total,
            )
            return
        if applied.node is not None:
            for listener in self._applied:
                self._call(listener, applied.node, event)

    async def tick(self, now: float) -> None:
        hold = self._hold(now)
        if hold != self.hold:
            if hold is None:
                log.info("liveness verdicts resumed", held_because=self.hold)
            else:
                log.warning("no node is declared Lost while this lasts", reason=hold)
            self.hold = hold
        for t in liveness.tick(self.view, self.policy, now, hold_lost=hold is not None):
            log.info("liveness", node=t.node.node_id, before=t.before, after=t.after, silent_s=round(t.silent_s, 2))
            for listener in self._changed:
                self._call(listener, t)
            if self._wants_sample(t):
                self._asking.add(t.node.node_id)
                task = asyncio.create_task(self._ask_for_sample(t.node.node_id))
                self._requests.add(task)
                task.add_done_callback(self._requests.discard)

    async def _ask_for_sample(self, node_id: str) -> None:
        """In a task of its own: the command waits on Kafka, liveness must not."""
        try:
            await self._commands.issue(node_id, ReportSampleArgs())  # type: ignore[union-attr]
        except Exception as exc:  # Kafka away: the node stays Suspect, and the next change asks again
            log.warning("sample request not sent", node=node_id, error=str(exc))
        finally:
            self._asking.discard(node_id)

    async def set_interval(self, node_id: str, interval_s: float) -> SentCommand:
        """Send a known node's agent the signed ``set_interval`` command (the leader sends; a standby's
        ``NotLeader`` becomes the API's 307). An interval the agent would refuse is ``Invalid`` here, naming
        ``interval_s``, before anything is recorded."""
        if self.node(node_id) is None:
            raise UnknownNode(node_id)
        try:
            return await self._sender.issue(node_id, SetIntervalArgs(interval_s=interval_s))
        except ValueError as exc:  # the argument check: the same one the agent runs
            raise Invalid(str(exc), field="interval_s", hint=INTERVAL_HINT) from None

    def _hold(self, now: float) -> str | None:
        """Why Lost verdicts cannot be trusted right now (None: they can). "This node is silent" and "I hear
        nobody" look alike from here; Kafka's answers to our own consumer, and whether every node went quiet
        at once, tell them apart."""
        cfg = self.cfg
        trouble = self.ctx.ingest.state().trouble(cfg.ingest_silent_after_s, cfg.ingest_lag_after_s)
        if trouble is not None:
            self._trouble_ended = None
            self._in_trouble = True
            return trouble
        if self._in_trouble:
            self._in_trouble, self._trouble_ended = False, now
        if self._trouble_ended is not None and now - self._trouble_ended < cfg.resume_grace_s:
            return (
                f"Kafka answers again since {now - self._trouble_ended:.1f} s; waiting {cfg.resume_grace_s:g} s "
                "for the agents to reconnect and send what they spooled"
            )
        if not liveness.all_silent(self.view, self.policy, now, cfg.mass_silence_min_nodes):
            self._all_silent_since = None
            return None
        if self._all_silent_since is None:
            self._all_silent_since = now
        if now - self._all_silent_since >= cfg.mass_silence_max_hold_s:
            return None  # the bus answers and every node stays silent: believe it
        return "every live node fell silent at once while Kafka answers (a network or bus fault, not node deaths)"

    def _wants_sample(self, t: liveness.Transition) -> bool:
        """A node just went Suspect: the leader asks it for a full sample, unless one is on its way."""
        return (
            t.after == "Suspect"
            and self._commands is not None
            and self.ctx.leadership.is_leader
            and t.node.node_id not in self._asking
            and not self._commands.has_pending(t.node.node_id, "report_sample")
        )

    def _call(self, listener: Any, *args: Any) -> None:
        """A listener's bug must not undo or repeat what the view already applied: log it and go on."""
        try:
            listener(*args)
        except Exception as exc:
            self.listener_errors += 1
            log.exception(
                "fleet listener failed", listener=getattr(listener, "__qualname__", repr(listener)), error=repr(exc)
            )

    def api(self) -> RouteSet:
        return RouteSet(
            routes.routes(self),
            self.openapi,
            health=lambda: {"nodes": len(self.view.nodes_by_id), "liveness_hold": self.hold},
        )

    def stats(self) -> dict[str, int]:
        return {
            "nodes": len(self.view.nodes_by_id),
            "flagged": self.view.rejected_total,
            "refused_nodes": self.view.refused_nodes,
            "listener_errors": self.listener_errors,
        }

    def status(self) -> dict[str, Any]:
        return {"nodes": msgspec.to_builtins(self.view.nodes()), "liveness_hold": self.hold}

    def metrics(self) -> dict[str, Any]:
        return series.series(self.view.nodes_by_id.values())

    def dashboard(self) -> Dashboard:
        def node(key: str | None) -> dashboard.NodeBoard | None:
            found = self.view.node(key or "")
            return None if found is None else dashboard.NodeBoard(now=self.now(), node=found)

        return Dashboard(
            panels=(
                Panel("fleet", "Fleet", lambda _: dashboard.board(self.view.nodes(), self.now())),
                Panel("node", "", node, keyed=True),
            ),
            timeline=lambda: dashboard.moments(self.view.nodes()),
        )
