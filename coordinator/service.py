"""The coordinator process: ingest, durable state, leadership, reactions, liveness ticks, commands, the API.

Every coordinator ingests every event (each in its own consumer group) and follows the state topics, so
any of them serves reads; only the leader decides. Start-up order is the durability contract: the state
topics are read to the end before anything else starts, and a new leader reads them to the end again,
records its term (epoch) and only then acts. The methods at the bottom are what the HTTP API calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import structlog

from coordinator.commands import Dispatcher
from coordinator.config import CoordinatorConfig
from coordinator.fleet import liveness
from coordinator.fleet.model import CordonRecord, NodeState
from coordinator.fleet.view import FleetView
from coordinator.leader import LeaderElector, next_epoch
from coordinator.leader.errors import NotLeader, UnknownNode
from coordinator.reactions import CordonPolicy, Reactor, operator_by
from coordinator.state import TERM_KEY, CommandIntent, LeaderTerm, StateStore, StateTail
from events.bus import EventConsumer, EventProducer, RecordInfo
from events.clock import Clock, SystemClock
from events.envelope import Event
from events.payloads import CommandAck, NodeFault, NodeSample
from events.signing import SigningKey
from events.topics import COMMAND_ACKS, NODE_FAULTS, NODE_REPORTS, NODE_SAMPLES, STATE_COMMANDS, STATE_NODES

__all__ = ["CoordinatorService", "LeaderInfo", "NotLeader", "UnknownNode"]
log = structlog.get_logger("myolo.coordinator")


@dataclass(frozen=True)
class LeaderInfo:
    instance_id: str
    epoch: int
    api_url: str
    is_self: bool


class CoordinatorService:
    def __init__(self, cfg: CoordinatorConfig, clock: Clock | None = None) -> None:
        self.cfg = cfg
        self.clock = clock or SystemClock()
        self.instance_id = cfg.instance_id
        self.api_url = cfg.api.url()
        self.view = FleetView(stale_after_s=cfg.lost_after_s)
        self.liveness = liveness.LivenessPolicy(cfg.lost_after_s, cfg.suspect_after_intervals)
        self.cordons = CordonPolicy(act_on_warn=cfg.act_on_warn)
        self.term: LeaderTerm | None = None  # ours, while leading
        self.last_term: LeaderTerm | None = None  # the latest recorded by anyone
        settings = cfg.kafka
        source = f"myolo-coordinator/{self.instance_id}"
        self._producer = EventProducer(settings, source=source, clock=self.clock)
        key = SigningKey.from_file(cfg.signing.key_file)
        self._signed = EventProducer(settings, source=source, clock=self.clock, signing_key=key)
        self.store = StateStore(self._producer)
        self.dispatcher = Dispatcher(
            self.store, self._signed, self.clock, instance_id=self.instance_id,
            retry_after_s=cfg.commands.retry_after_s, max_attempts=cfg.commands.max_attempts,
        )  # fmt: skip
        self.reactor = Reactor(self.store, self.view, self.clock, lambda: self.epoch, self._drain_after_cordon)
        self.tail = StateTail(settings, [STATE_NODES, STATE_COMMANDS], self._apply_state)
        self.ingest = EventConsumer(
            settings, [NODE_SAMPLES, NODE_FAULTS, NODE_REPORTS, COMMAND_ACKS], f"myolo-coordinator-{self.instance_id}",
            self._on_event, dead_letters=self._producer, clock=self.clock, auto_offset_reset=cfg.ingest_from,
        )  # fmt: skip
        self.elector = LeaderElector(
            settings, group_id=cfg.leader.group_id, instance_id=self.instance_id, on_elected=self._begin_term,
            on_deposed=self._end_term, session_timeout_ms=cfg.leader.session_timeout_ms,
            heartbeat_interval_ms=cfg.leader.heartbeat_interval_ms,
        )  # fmt: skip
        self._tasks: list[asyncio.Task] = []
        self._stop = asyncio.Event()
        self._api_runner: Any = None
        self.started = asyncio.Event()

    # ---- lifecycle ----------------------------------------------------------------------------------------
    async def start(self) -> None:
        await self._producer.start()
        await self._signed.start()
        await self.tail.start()
        self._tasks.append(asyncio.create_task(self.tail.run(), name="state-tail"))
        await self.tail.caught_up()  # the durable state, read to the end, before anything acts
        log.info("state read", records=self.tail.applied, nodes=len(self.view.nodes_by_id),
                 commands=len(self.dispatcher.intents), last_epoch=self.last_term and self.last_term.epoch)  # fmt: skip
        await self._start_api()
        for name, coro in (
            ("ingest", self.ingest.run()),
            ("reactor", self.reactor.run()),
            ("ticks", self._ticks()),
            ("elector", self.elector.run()),
        ):
            self._tasks.append(asyncio.create_task(coro, name=name))
        self.started.set()

    def request_stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        """Start, serve until :meth:`request_stop` (SIGTERM) or a component dies, then stop everything."""
        await self.start()
        stopper = asyncio.create_task(self._stop.wait())
        done, _ = await asyncio.wait([stopper, *self._tasks], return_when=asyncio.FIRST_COMPLETED)
        failed = [t for t in done if t is not stopper and t.exception() is not None]
        for t in failed:
            log.error("component failed", component=t.get_name(), error=repr(t.exception()))
        await self.stop()
        if failed:
            raise RuntimeError(f"component {failed[0].get_name()} failed") from failed[0].exception()

    async def stop(self) -> None:
        await self.elector.stop()  # leave the group first: a standby takes over without a session timeout
        await self.ingest.stop()
        await self.tail.stop()
        named = {t.get_name(): t for t in self._tasks}
        for name in ("elector", "ingest", "state-tail"):
            t = named.get(name)
            if t is not None and not t.done():
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await asyncio.wait_for(t, 15)
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._api_runner is not None:
            await self._api_runner.cleanup()
        await self._signed.stop()
        await self._producer.stop()

    async def _start_api(self) -> None:
        if not self.cfg.api.enabled:
            return
        try:
            from coordinator.api import create_app
        except ImportError as exc:
            log.warning("HTTP API not available in this build", error=str(exc))
            return
        from aiohttp import web

        runner = web.AppRunner(create_app(self))
        await runner.setup()
        site = web.TCPSite(runner, self.cfg.api.host, self.cfg.api.port)
        await site.start()
        self._api_runner = runner
        if self.cfg.api.port == 0 and not self.cfg.api.advertise_url:  # an ephemeral port: say which one
            port = runner.addresses[0][1]
            self.api_url = f"http://{self.cfg.api.host}:{port}"
        log.info("HTTP API listening", url=self.api_url)

    # ---- state --------------------------------------------------------------------------------------------
    def _apply_state(self, topic: str, key: str, record: msgspec.Struct | None, kind: str) -> None:
        now = self.clock.now()
        if isinstance(record, CordonRecord):
            node = self.view.node(record.node_id)
            if node is None or node.cordon is None or record.time >= node.cordon.time:  # our own echo may lag
                self.view.set_cordon(record, now)
        elif isinstance(record, LeaderTerm):
            if self.last_term is None or record.epoch >= self.last_term.epoch:
                self.last_term = record
            if self.term is not None and record.epoch > self.term.epoch and record.instance_id != self.instance_id:
                log.error("a newer term was recorded by another coordinator: stepping down",
                          ours=self.term.epoch, theirs=record.epoch, leader=record.instance_id)  # fmt: skip
                self._end_term()
        elif isinstance(record, CommandIntent) or (record is None and kind == "command"):
            self.dispatcher.apply_state(key, record)  # type: ignore[arg-type]
        elif record is None and kind == "cordon":
            node = self.view.node(key)
            if node is not None:
                node.cordon = None

    # ---- leadership ---------------------------------------------------------------------------------------
    @property
    def epoch(self) -> int | None:
        return self.term.epoch if self.term is not None else None

    @property
    def is_leader(self) -> bool:
        return self.term is not None

    async def _begin_term(self, generation: int) -> None:
        """Start a term; on a broker error try again for as long as we hold the partition (never hold
        leadership without leading). Cancelled by the elector when the partition is revoked."""
        while self.elector.holds_partition:
            try:
                await self._start_term(generation)
                return
            except Exception as exc:
                log.error("term start failed, retrying", generation=generation, error=repr(exc))
                await asyncio.sleep(1.0)  # backing off broker I/O, not waiting for simulated time

    async def _start_term(self, generation: int) -> None:
        await self.tail.caught_up()  # everything the previous leader decided, before we decide anything
        epoch = next_epoch(self.last_term, generation)
        term = LeaderTerm(
            epoch=epoch,
            instance_id=self.instance_id,
            api_url=self.api_url,
            started=self.clock.now(),
            generation=generation,
        )
        await self.store.put(STATE_COMMANDS, TERM_KEY, term)  # the term is recorded before it acts
        if not self.elector.holds_partition:
            return
        self.term = self.last_term = term
        log.info("leading", epoch=epoch, generation=generation)
        resent = await self.dispatcher.lead(epoch)
        swept = self._sweep()
        log.info("term started", epoch=epoch, commands_resent=resent, cordons_queued=swept)

    def _end_term(self) -> None:
        if self.term is not None:
            log.info("no longer leading", epoch=self.term.epoch)
        self.term = None
        self.dispatcher.step_down()

    def _sweep(self) -> int:
        """What happened while nobody led: Lost or failing nodes that are not cordoned yet."""
        queued = 0
        for node in self.view.nodes():
            if node.cordoned:
                continue
            if node.liveness == "Lost":
                queued += self.reactor.request(node.node_id, "Lost (found when this term started)", "auto:lost")
            elif node.health == "fail" or (node.health == "warn" and self.cfg.act_on_warn):
                why = "; ".join(node.health_reasons) or "no reason given"
                queued += self.reactor.request(node.node_id, f"{node.health.upper()} health: {why}", "auto:fault")
        return queued

    # ---- ingest and ticks ---------------------------------------------------------------------------------
    async def _on_event(self, event: Event, info: RecordInfo) -> None:
        data = event.data
        if isinstance(data, CommandAck):
            try:
                await self.dispatcher.on_ack(data)
            except Exception as exc:  # the ack is re-sent as "duplicate" when we retry: nothing is lost
                log.warning("ack not recorded", command_id=data.command_id, error=str(exc))
            return
        applied = self.view.apply(event, self.clock.now())
        if applied.rejected is not None:
            log.warning("event flagged", type=event.type, key=event.key, reason=applied.rejected, topic=info.topic)
            return
        if self.term is None or applied.node is None:
            return
        if isinstance(data, NodeFault):
            decision = self.cordons.for_fault(applied.node, data)
        elif isinstance(data, NodeSample):
            decision = self.cordons.for_sample(applied.node, data)
        else:
            return
        if decision is not None:
            self.reactor.request(data.node_id, *decision)

    async def _ticks(self) -> None:
        while True:
            await self.clock.sleep(self.cfg.tick_s)
            await self.tick()

    async def tick(self) -> None:
        """One liveness evaluation (every coordinator), then the leader's reactions and command retries."""
        for t in liveness.tick(self.view, self.liveness, self.clock.now()):
            log.info("liveness", node=t.node.node_id, before=t.before, after=t.after, silent_s=round(t.silent_s, 2))
            if self.term is None:
                continue
            decision = self.cordons.for_transition(t)
            if decision is not None:
                self.reactor.request(t.node.node_id, *decision)
            elif self._wants_sample(t):
                with contextlib.suppress(Exception):
                    await self.dispatcher.issue(t.node.node_id, "report_sample")
        if self.term is not None:
            try:
                await self.dispatcher.retry_due()
            except Exception as exc:
                log.warning("command retries failed this tick", error=str(exc))
        if self.cfg.status_file:
            self.write_status(Path(self.cfg.status_file))

    def _wants_sample(self, t: liveness.Transition) -> bool:
        """A node just went Suspect: ask it for a full sample, unless that request is already on its way."""
        return (
            t.after == "Suspect"
            and self.cfg.commands.request_sample_on_suspect
            and not self.dispatcher.has_pending(t.node.node_id, "report_sample")
        )

    # ---- what the HTTP API calls --------------------------------------------------------------------------
    def nodes(self) -> list[NodeState]:
        return self.view.nodes()

    def node(self, node_id: str) -> NodeState | None:
        return self.view.node(node_id)

    def gpus(self) -> list[dict]:
        return self.view.gpus()

    def leader_info(self) -> LeaderInfo | None:
        """The current leader as far as this coordinator knows (itself, or the last term recorded)."""
        t = self.term or self.last_term
        if t is None:
            return None
        return LeaderInfo(t.instance_id, t.epoch, t.api_url, is_self=self.term is not None)

    def _require_leader(self) -> None:
        if self.term is None:
            other = self.last_term if self.last_term and self.last_term.instance_id != self.instance_id else None
            raise NotLeader(other.api_url if other else None, other.instance_id if other else None)

    async def cordon(self, node_id: str, reason: str, by: str) -> CordonRecord:
        """An operator's cordon: recorded in the state topic (acknowledged) before it takes effect."""
        self._require_leader()
        if self.view.node(node_id) is None:
            raise UnknownNode(node_id)
        return await self.reactor.write(node_id, True, reason.strip() or "cordoned by hand", operator_by(by))

    async def uncordon(self, node_id: str, reason: str, by: str) -> CordonRecord:
        self._require_leader()
        if self.view.node(node_id) is None:
            raise UnknownNode(node_id)
        return await self.reactor.write(node_id, False, reason.strip() or "uncordoned by hand", operator_by(by))

    async def _drain_after_cordon(self, rec: CordonRecord) -> None:
        """An automatic cordon also tells the node to drain (no new trainer workers), with the reason."""
        try:
            await self.dispatcher.issue(rec.node_id, "drain", {"reason": rec.reason})
        except Exception as exc:  # not leading any more, or Kafka away: the cordon stands; log and go on
            log.warning("drain command not sent", node=rec.node_id, error=str(exc))

    async def send_command(self, node_id: str, action: str, args: dict[str, Any] | None = None) -> CommandIntent:
        self._require_leader()
        if self.view.node(node_id) is None:
            raise UnknownNode(node_id)
        return await self.dispatcher.issue(node_id, action, args)

    def commands(self) -> list[CommandIntent]:
        return sorted(self.dispatcher.intents.values(), key=lambda i: i.created)

    def stats(self) -> dict[str, Any]:
        s = self.ingest.stats
        return {
            "consumed": s.consumed, "handled": s.handled, "dead_lettered": s.dead_lettered,
            "duplicates": s.duplicates, "flagged": self.view.rejected_total, "state_writes": self.store.writes,
            "commands_sent": self.dispatcher.sent, "cordons_written": self.reactor.cordons_written,
        }  # fmt: skip

    def status(self) -> dict[str, Any]:
        info = self.leader_info()
        term = self.term or self.last_term
        return {
            "instance_id": self.instance_id,
            "is_leader": self.is_leader,
            "epoch": self.epoch,
            "leader": None
            if info is None
            else {"instance_id": info.instance_id, "epoch": info.epoch, "api_url": info.api_url},
            "group_generation": self.elector.generation,
            "term_generation": term.generation if term is not None else None,
            "api_url": self.api_url,
            "time": self.clock.now(),
            "stats": self.stats(),
            "nodes": msgspec.to_builtins(self.view.nodes()),
            "commands": msgspec.to_builtins(self.commands()),
        }

    def write_status(self, path: Path) -> None:
        """A JSON snapshot for tools and tests (atomic: written aside, then renamed over)."""
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(self.status()))
        tmp.replace(path)
