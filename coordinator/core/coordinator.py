"""The coordinator process: lifecycle, leadership and terms, state replay, ingest dispatch, ticks, the API.

Every coordinator ingests every event (each in its own consumer group) and follows the state topics, so any
of them serves reads; only the leader decides. Start-up order is the durability contract: the state topics
are read to the end before anything else starts, and a new leader reads them to the end again, records its
term (epoch) and only then tells the components to lead. What to do with events, state and ticks is the
components' business; which components there are is chosen by the caller (the daemon's list is
``coordinator/components.py``); this file only routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

import msgspec
import structlog
from aiohttp import web

from myolo.common.clock import Clock, SystemClock
from myolo.common.files import atomic_write
from myolo.common.keys import load_signer
from myolo.coordinator.api.requests import RequestCounts
from myolo.coordinator.core import assembly
from myolo.coordinator.core.component import Component, StateTopic
from myolo.coordinator.core.config import CoreConfig, previous_signers, section
from myolo.coordinator.core.context import Context
from myolo.coordinator.core.dashboard import Boards, collect
from myolo.coordinator.core.election import LeaderElector
from myolo.coordinator.core.gc_tuning import tune_gc
from myolo.coordinator.core.ingest import ConsumerHealth
from myolo.coordinator.core.ingest_guard import IngestGuard
from myolo.coordinator.core.leadership import (
    STATE_COORDINATOR,
    TERM_KEY,
    LeaderInfo,
    Leadership,
    LeaderTerm,
    next_epoch,
)
from myolo.coordinator.core.metrics import CoordinatorMetrics, Series
from myolo.coordinator.core.router import EventRouter
from myolo.coordinator.state import StateCodec, StateKeys, StateStore, StateTail
from myolo.events.bus import EventConsumer, EventProducer
from myolo.events.signing import GUARDED_NODE_EVENTS
from myolo.events.topics import CATALOGUE, Topic

log = structlog.get_logger("myolo.coordinator")
CORE_STATE = StateTopic(
    STATE_COORDINATOR,
    {"term": LeaderTerm},
    partitions=1,
    key="record name",
    description="coordinator state: the leadership term (its epoch), owned by the core",
)
T = TypeVar("T")


def state_codec(components: Sequence[type[Component]]) -> StateCodec:
    """The codec of every state record kind of the core and these components."""
    return StateCodec(assembly.state_kinds(CORE_STATE, tuple(components)))


def state_topics(components: Sequence[type[Component]]) -> tuple[StateTopic, ...]:
    """The state topics of the core and these components: what backup, restore and topic creation read."""
    return assembly.state_topics(CORE_STATE, tuple(components))


def topic_specs(components: Sequence[type[Component]]) -> tuple[Topic, ...]:
    """Every topic a coordinator of these components uses: the events' catalogue and the state topics."""
    return (*CATALOGUE, *(st.spec() for st in state_topics(components)))


class Coordinator:
    def __init__(
        self,
        cfg: CoreConfig,
        components: Sequence[type[Component]],
        clock: Clock | None = None,
        *,
        producers: tuple[EventProducer, EventProducer] | None = None,
    ) -> None:
        """Builds ``components`` in their order, each handed what it requires. ``producers`` (plain, signed)
        replace the Kafka producers: tests record what would be written."""
        classes = tuple(components)
        assembly.check_names(classes)
        offered = assembly.check_needs(classes)  # before anything is built: a missing or circular need
        self.cfg = cfg
        self.clock = clock or SystemClock()
        self.instance_id = cfg.instance_id
        self.api_url = cfg.api.url()
        self.leadership = Leadership(self.instance_id)
        settings = cfg.kafka
        source = f"myolo-coordinator/{self.instance_id}"
        key = load_signer(cfg.signing.key_file)  # commands; state records with a key derived from it
        if producers is None:
            producers = (
                EventProducer(settings, source=source, clock=self.clock),
                EventProducer(settings, source=source, clock=self.clock, signer=key),
            )
        self._producer, self._signed = producers
        self._owners = assembly.state_owners(CORE_STATE, classes)
        keys = StateKeys.derive(key, previous_signers(cfg.signing))
        self.store = StateStore(self._producer, state_codec(classes), keys)
        self.peers: list[Component] = []
        self.ingest_health = ConsumerHealth()
        self.boards = Boards()  # what /ui shows of each component, and which one changed
        built: dict[type[Component], Component] = {}
        for cls in classes:
            ctx = Context(
                component=cls.name,
                instance_id=self.instance_id,
                clock=self.clock,
                core=cfg,
                config=section(cfg, cls.name) if cls.config is not None else None,
                store=self.store,
                producer=self._producer,
                signed=self._signed,
                leadership=self.leadership,
                ingest=self.ingest_health,
                needs=MappingProxyType({need: built[offered[need]] for need in cls.requires}),
                boards=self.boards,
            )
            built[cls] = cls(ctx)
            self.peers.append(built[cls])
        self.components: dict[str, Component] = {type(c).name: c for c in self.peers}
        self.boards.parts = collect(self.peers)
        self.router = EventRouter(list(self.peers), handled=self.boards.changed)
        self.guard = IngestGuard(list(self.peers), GUARDED_NODE_EVENTS)  # checked before any component acts
        self.tail = StateTail(settings, list(self._owners), self.store.codec, self.apply_state, self.store.keys)
        self.ingest = EventConsumer(
            settings,
            self.router.topics(),
            f"myolo-coordinator-{self.instance_id}",
            self.router,
            dead_letters=self._producer,
            verifier=self.guard,  # type: ignore[arg-type]  # anything with verify(event) raising InvalidEvent
            clock=self.clock,
            auto_offset_reset=cfg.ingest_from,
        )
        self.ingest_health.consumer = self.ingest
        self.elector = LeaderElector(
            settings,
            group_id=cfg.leader.group_id,
            instance_id=self.instance_id,
            on_elected=self._begin_term,
            on_deposed=self._end_term,
            session_timeout_ms=cfg.leader.session_timeout_ms,
            heartbeat_interval_ms=cfg.leader.heartbeat_interval_ms,
        )
        self.requests = RequestCounts()  # the API's requests, counted by its middleware
        self.metrics = CoordinatorMetrics(
            self.instance_id, [("core", self.core_metrics), *((type(c).name, c.metrics) for c in self.peers)]
        )
        self._tasks: list[asyncio.Task] = []
        self.ticks_skipped = 0
        self._stop = asyncio.Event()
        self._api_runner: web.AppRunner | None = None
        self.started = asyncio.Event()

    def get(self, interface: type[T]) -> T:
        """The first component that is an ``interface`` (a Protocol or a component class): for tests and tools."""
        for comp in self.peers:
            if isinstance(comp, interface):
                return comp
        raise LookupError(f"no component is a {interface.__name__} (built: {list(self.components)})")

    # ---- lifecycle ----------------------------------------------------------------------------------------
    async def start(self) -> None:
        await self._producer.start()
        await self._signed.start()
        await self.tail.start()
        self._spawn("state-tail", self.tail.run)
        await self.tail.caught_up()  # the durable state, read to the end, before anything acts
        last = self.leadership.last_term
        log.info(
            "state read",
            records=self.tail.applied,
            skipped=self.tail.skipped,
            forged=self.tail.forged,
            last_epoch=last and last.epoch,
        )
        await self._start_api()
        log.debug("garbage collection tuned for ingest", thresholds=tune_gc())
        self._spawn("ingest", self.ingest.run)
        self._spawn("ticks", self.tick_loop)
        for comp in self.peers:
            for name, run in comp.background().items():
                self._spawn(f"{type(comp).name}:{name}", run)
        self._spawn("elector", self.elector.run)
        self.started.set()

    def _spawn(self, name: str, run: Any) -> None:
        self._tasks.append(asyncio.create_task(run(), name=name))

    def ended_tasks(self) -> list[str]:
        """Names of the long-running tasks that are no longer running (none, while healthy)."""
        return [t.get_name() for t in self._tasks if t.done()]

    def request_stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        """Start, serve until :meth:`request_stop` (SIGTERM) or a task dies, then stop everything."""
        await self.start()
        stopper = asyncio.create_task(self._stop.wait())
        done, _ = await asyncio.wait([stopper, *self._tasks], return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        failed = [t for t in done if t is not stopper and (t.cancelled() or t.exception() is not None)]
        for t in failed:
            log.error("task failed", task=t.get_name(), error=repr(None if t.cancelled() else t.exception()))
        await self.stop()
        if failed:
            cause = None if failed[0].cancelled() else failed[0].exception()
            raise RuntimeError(f"coordinator task {failed[0].get_name()} failed") from cause

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
        from myolo.coordinator.api.app import serve
        from myolo.coordinator.api.audit import kafka_sender
        from myolo.coordinator.api.security import security_for, server_ssl

        api = self.cfg.api
        parts = [p for p in (c.api() for c in self.peers) if p is not None]
        security = security_for(api, kafka_sender(self._producer), self.clock, self.instance_id)  # audit: plain
        self._api_runner, port = await serve(
            self, parts, security, api.host, api.port, server_ssl(api), requests=self.requests
        )
        if api.port == 0 and not api.advertise_url:  # an ephemeral port: say which one
            self.api_url = msgspec.structs.replace(api, port=port).url()
        log.info("HTTP API listening", url=self.api_url)

    # ---- state --------------------------------------------------------------------------------------------
    def apply_state(self, topic: str, key: str, record: msgspec.Struct | None, kind: str) -> None:
        """One record of a state topic (the state tail calls this, in log order): to its owner."""
        owner = self._owners.get(topic)
        if owner == "core":
            if isinstance(record, LeaderTerm) and self.leadership.recorded(record):
                self._end_term()
        elif owner is not None:
            self.components[owner].on_state(topic, key, record, kind)
            self.boards.changed(owner)

    # ---- leadership ---------------------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.leadership.is_leader

    @property
    def epoch(self) -> int | None:
        return self.leadership.epoch

    def leader_info(self) -> LeaderInfo | None:
        return self.leadership.info()

    def generations(self) -> tuple[int, int | None]:
        term = self.leadership.term or self.leadership.last_term
        return self.elector.generation, term.generation if term is not None else None

    async def _begin_term(self, generation: int) -> None:
        """Start a term; on a broker error try again for as long as we hold the partition (never hold
        leadership without leading). Cancelled by the elector when the partition is revoked."""
        while self.elector.holds_partition:
            try:
                await self._start_term(generation)
                return
            except Exception as exc:
                log.error("term start failed, retrying", generation=generation, error=repr(exc))
                self._end_term()
                await asyncio.sleep(1.0)  # backing off broker I/O, not waiting for simulated time

    async def _start_term(self, generation: int) -> None:
        await self.tail.caught_up()  # everything the previous leader decided, before we decide anything
        term = LeaderTerm(
            epoch=next_epoch(self.leadership.last_term, generation),
            instance_id=self.instance_id,
            api_url=self.api_url,
            started=self.clock.now(),
            generation=generation,
        )
        await self.store.put(STATE_COORDINATOR, TERM_KEY, term)  # the term is recorded before it acts
        await self.store.reseal(self.tail.stale())  # records sealed with a key rotated out, sealed again
        if self.elector.holds_partition:
            await self.assume_term(term)

    async def assume_term(self, term: LeaderTerm) -> None:
        """Lead under ``term``, which is already recorded: every component starts leading, in list order."""
        self.leadership.begin(term)
        log.info("leading", epoch=term.epoch, generation=term.generation)
        for comp in self.peers:
            await comp.on_lead(term.epoch)
        log.info("term started", epoch=term.epoch)

    def _end_term(self) -> None:
        if self.leadership.end():
            for comp in self.peers:
                comp.on_step_down()

    # ---- ticks --------------------------------------------------------------------------------------------
    async def tick_loop(self) -> None:
        """Every ``tick_s``, each component's tick as a task of its own: one that waits on Kafka (a command
        retry while the broker is away) never holds back another's (liveness), nor the status file. A
        component whose previous tick still runs skips a round, counted in ``ticks_skipped``."""
        running: dict[str, asyncio.Task] = {}
        try:
            while True:
                await self.clock.sleep(self.cfg.tick_s)
                now = self.clock.now()
                for comp in self.peers:
                    name = type(comp).name
                    previous = running.get(name)
                    if previous is not None and not previous.done():
                        self.ticks_skipped += 1
                        continue
                    running[name] = asyncio.create_task(self._tick_one(comp, now), name=f"tick:{name}")
                self._write_status()
        finally:  # stopping: no component tick outlives the loop that started it
            for task in running.values():
                task.cancel()
            await asyncio.gather(*running.values(), return_exceptions=True)

    async def tick(self) -> None:
        """One tick of every component, in list order, each to its end; then the status snapshot."""
        now = self.clock.now()
        for comp in self.peers:
            await self._tick_one(comp, now)
        self._write_status()

    async def _tick_one(self, comp: Component, now: float) -> None:
        """A component that fails its tick is logged; the others and its next tick go on."""
        try:
            await comp.tick(now)
        except Exception as exc:
            log.exception("component tick failed", component=type(comp).name, error=repr(exc))

    def _write_status(self) -> None:
        if not self.cfg.status_file:
            return
        try:
            self.write_status(Path(self.cfg.status_file))
        except Exception as exc:  # a full disk must not stop the coordinator; the next tick tries again
            log.warning("status file not written", path=self.cfg.status_file, error=repr(exc))

    # ---- metrics ------------------------------------------------------------------------------------------
    def metrics_text(self) -> str:
        return self.metrics.render()

    def core_metrics(self) -> dict[str, Iterable[Series]]:
        """The core's own series: leadership, ingest, dead letters, forged state records, API requests."""
        info = self.leader_info()
        s = self.ingest.stats
        return {
            "myolo_coordinator_leader": [((), 1.0 if self.is_leader else 0.0)],
            "myolo_coordinator_epoch": [((), float(info.epoch))] if info is not None else [],
            "myolo_coordinator_events_consumed_total": [((), float(s.consumed))],
            "myolo_coordinator_ingest_lag_records": [
                ((topic, str(part)), float(lag)) for (topic, part), lag in sorted(self.ingest.partition_lag().items())
            ],
            "myolo_coordinator_ingest_lag_seconds": [((), self.ingest_health.state().lag_s)],
            "myolo_coordinator_dead_letters_total": [(key, float(n)) for key, n in sorted(s.dead_lettered_by.items())],
            "myolo_coordinator_state_records_forged_total": [((), float(self.tail.forged))],
            "myolo_api_requests_total": [(key, float(n)) for key, n in sorted(self.requests.counts.items())],
        }

    # ---- status -------------------------------------------------------------------------------------------
    def stats(self) -> dict[str, int]:
        s = self.ingest.stats
        out = {
            "consumed": s.consumed,
            "handled": s.handled,
            "dead_lettered": s.dead_lettered,
            "duplicates": s.duplicates,
            "component_failures": self.router.failures,
            "state_writes": self.store.writes,
            "state_skipped": self.tail.skipped,
            "state_forged": self.tail.forged,
            "ticks_skipped": self.ticks_skipped,
        }
        for comp in self.peers:
            out.update(comp.stats())
        return out

    def status(self) -> dict[str, Any]:
        info = self.leader_info()
        group_generation, term_generation = self.generations()
        body: dict[str, Any] = {
            "instance_id": self.instance_id,
            "is_leader": self.is_leader,
            "epoch": self.epoch,
            "leader": None
            if info is None
            else {"instance_id": info.instance_id, "epoch": info.epoch, "api_url": info.api_url},
            "group_generation": group_generation,
            "term_generation": term_generation,
            "api_url": self.api_url,
            "time": self.clock.now(),
            "ingest": msgspec.to_builtins(self.ingest_health.state()),
            "stats": self.stats(),
        }
        for comp in self.peers:
            body.update(comp.status())
        return body

    def write_status(self, path: Path) -> None:
        """A JSON snapshot for tools and tests (crash-safe: written aside, then renamed over)."""
        atomic_write(path, json.dumps(self.status()).encode(), durable=False)
