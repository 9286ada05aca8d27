"""The rollouts component: upgrades the agent (or the trainer) on every node in waves, gated, with rollback.

Per wave: cordon its nodes (their jobs shrink away through the elastic scheduler), send each a signed
``upgrade`` (the agent installs the release beside the current one, switches, restarts), wait until every
node is back Ready on the new version, uncordon (the jobs grow back), bake, then judge the gates over the bake
window (coordinator/rollouts/gates.py). Pass: the next wave. Fail: every node upgraded so far gets a
``rollback`` to the version it ran before, and the rollout ends RolledBack with the gate and its figures.

Only the leader steps rollouts, one at a time in the whole fleet; every step is written to
``myolo.state.rollouts`` before it acts, so a new leader resumes a rollout mid-wave (commands it finds
already sent are followed by id, not sent again). Every coordinator keeps the evidence (faults, leak reports,
jobs' throughput) so a new leader judges the bake with what was seen before it took over.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import structlog

from myolo.coordinator.commands.interface import CommandSender
from myolo.coordinator.cordons.interface import AutoCordons
from myolo.coordinator.core.component import Component, RouteSet, StateTopic
from myolo.coordinator.core.context import Context
from myolo.coordinator.core.dashboard import Dashboard, Panel
from myolo.coordinator.fleet.interface import FleetNodes
from myolo.coordinator.jobs.interface import JobsAPI
from myolo.coordinator.rollouts import dashboard, routes, series
from myolo.coordinator.rollouts.config import Plan, RolloutsConfig, check
from myolo.coordinator.rollouts.evidence import Evidence
from myolo.coordinator.rollouts.interface import RolloutConflict, RolloutError, UnknownRollout
from myolo.coordinator.rollouts.plan import waves
from myolo.coordinator.rollouts.reconcile import Reconciler
from myolo.coordinator.rollouts.records import STATE_ROLLOUTS, Phase, RolloutRecord, RolloutSpec, RolloutStatus, Wave
from myolo.coordinator.rollouts.store import RolloutStore
from myolo.events.bus import RecordInfo
from myolo.events.envelope import Event
from myolo.events.payloads import LeakReport, NodeFault, ReleasePublished

log = structlog.get_logger("myolo.coordinator.rollouts")


class Rollouts(Component):
    name = "rollouts"
    requires = (
        FleetNodes,
        JobsAPI,
        CommandSender,
        AutoCordons,
    )
    config = RolloutsConfig
    openapi = Path(__file__).with_name("openapi.yaml")
    consumes = (ReleasePublished, NodeFault, LeakReport)
    owns = (
        StateTopic(
            STATE_ROLLOUTS,
            {"rollout": RolloutRecord},
            partitions=1,
            key="rollout id",
            description="coordinator state: rolling upgrades",
        ),
    )

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.cfg: RolloutsConfig = ctx.config
        self.fleet = ctx.need(FleetNodes)
        self.jobs = ctx.need(JobsAPI)
        self.commands = ctx.need(CommandSender)
        self.store = RolloutStore(ctx)
        self.evidence = Evidence()
        self._lock = asyncio.Lock()
        self.reconciler = Reconciler(
            ctx, self.store, self.evidence, self.fleet, self.jobs, self.commands, ctx.need(AutoCordons)
        )

    @classmethod
    def check_config(cls, section: RolloutsConfig, core: Any) -> None:
        check(section, core)

    # ---- RolloutsAPI ----------------------------------------------------------------------------------------
    def rollouts(self) -> tuple[RolloutRecord, ...]:
        return self.store.rollouts()

    def rollout(self, name: str) -> RolloutRecord | None:
        return self.store.records.get(name)

    def active(self) -> RolloutRecord | None:
        return self.store.active()

    async def start(
        self,
        component: str,
        version: str,
        artifact: str,
        sha256: str,
        by: str,
        plan: Plan | None = None,
        source: str = "operator",
    ) -> RolloutRecord:
        self.ctx.leadership.require()
        if component not in ("agent", "trainer"):
            raise RolloutError("component", f"{component!r} is not something agents install; use agent or trainer")
        async with self._lock:
            busy = self.active()
            if busy is not None:
                raise RolloutConflict(
                    "version",
                    f"rollout {busy.name} is {busy.status.phase}; one rollout at a time (pause or abort it first)",
                )
            name = f"{component}-{version}"
            if name in self.store.records:
                name = f"{name}-{len([n for n in self.store.records if n.startswith(name)]) + 1}"
            if len(self.store.records) >= self.cfg.max_rollouts:
                raise RolloutError("name", f"{self.cfg.max_rollouts} rollouts are recorded (rollouts.max_rollouts)")
            plan = plan or self.cfg.plan
            nodes, skipped = [], {}
            for node in self.fleet.nodes():
                if node.schedulable:
                    nodes.append(node.node_id)
                else:
                    skipped[node.node_id] = "cordoned" if node.cordoned else f"{node.liveness}, health {node.health}"
            if not nodes:
                raise RolloutConflict("nodes", f"no node is Ready and uncordoned to upgrade (skipped: {skipped})")
            planned = waves(nodes, self.jobs.busy_nodes(), plan.waves)
            now = self.ctx.clock.now()
            rec = RolloutRecord(
                name=name,
                created=now,
                spec=RolloutSpec(
                    component=component,
                    version=version,
                    artifact=artifact,
                    sha256=sha256,
                    by=by,
                    source=source,
                    plan=plan,
                ),
                status=RolloutStatus(
                    updated=now,
                    waves=[Wave(index=i, percent=p, nodes=ns) for i, (p, ns) in enumerate(planned)],
                    skipped=skipped,
                ),
            )
            sizes = "/".join(str(len(w.nodes)) for w in rec.status.waves)
            rec = await self.store.save(
                rec, "Progressing", f"planned {len(rec.status.waves)} wave(s) of {sizes} node(s)", by
            )
            log.info("rollout started", rollout=name, version=version, waves=sizes, by=by)
            return rec

    async def act(self, name: str, action: str, by: str) -> RolloutRecord:
        self.ctx.leadership.require()
        async with self._lock:
            rec = self.store.records.get(name)
            if rec is None:
                raise UnknownRollout("name", f"no rollout named {name!r} (myoloctl rollout history lists them)")
            if action == "pause":
                self._expect(rec, action, ("Progressing",))
                rec = await self.store.save(rec, "Paused", "paused", by)
            elif action == "resume":
                self._expect(rec, action, ("Paused",))
                rec = await self.store.save(rec, "Progressing", "resumed", by)
            elif action in ("abort", "undo"):
                allowed = ("Progressing", "Paused") if action == "abort" else ("Progressing", "Paused", "Succeeded")
                self._expect(rec, action, allowed)
                ending: Phase = "Aborted" if action == "abort" else "RolledBack"
                reason = f"{action} by {by}: rolling the upgraded nodes back"
                rec = await self.store.save(rec, "RollingBack", reason, by, ending=ending)
                rec = await self.reconciler.rolling_back(rec, self.ctx.clock.now())
            else:
                raise RolloutError("action", f"{action!r} is not one of pause, resume, abort, undo")
            return rec

    @staticmethod
    def _expect(rec: RolloutRecord, action: str, phases: tuple[str, ...]) -> None:
        if rec.status.phase not in phases:
            raise RolloutConflict("phase", f"cannot {action} rollout {rec.name}: it is {rec.status.phase}")

    # ---- evidence (every coordinator) -----------------------------------------------------------------------
    async def on_event(self, event: Event, info: RecordInfo) -> None:
        data, now = event.data, self.ctx.clock.now()
        if isinstance(data, NodeFault):
            self.evidence.fault(data, now)
        elif isinstance(data, LeakReport):
            self.evidence.leak(data, now)
        elif isinstance(data, ReleasePublished):
            await self._released(data)

    async def _released(self, rel: ReleasePublished) -> None:
        component = self.cfg.components.get(rel.component)
        if not self.cfg.start_on_release or component is None or not self.ctx.leadership.is_leader:
            return
        if rel.sha256 is None:
            log.warning("release not rolled out: it has no sha256", component=rel.component, version=rel.version)
            return
        try:
            await self.start(component, rel.version, rel.artifact, rel.sha256, "auto:release", source="release")
        except RolloutError as exc:
            log.warning("release not rolled out", component=rel.component, version=rel.version, reason=str(exc))

    # ---- the leader's steps ---------------------------------------------------------------------------------
    async def tick(self, now: float) -> None:
        self.evidence.sample(self.jobs, now)
        if not self.ctx.leadership.is_leader:
            return
        async with self._lock:
            await self.reconciler.reconcile(now)

    # ---- state, API -----------------------------------------------------------------------------------------
    def on_state(self, topic: str, key: str, record: msgspec.Struct | None, kind: str) -> None:
        if isinstance(record, RolloutRecord) or record is None:
            self.store.followed(key, record)

    def api(self) -> RouteSet:
        return RouteSet(routes.routes(self), self.openapi, health=self._health, admin_routes=routes.ADMIN_ROUTES)

    def _health(self) -> dict[str, Any]:
        rec = self.active()
        return {
            "rollout": f"{rec.name} {rec.status.phase} wave {rec.status.wave + 1}/{len(rec.status.waves)}"
            if rec
            else None
        }

    def stats(self) -> dict[str, int]:
        return {
            "rollouts": len(self.store.records),
            "faults_seen": len(self.evidence.faults),
            "leak_reports_seen": len(self.evidence.leaks),
        }

    def metrics(self) -> dict[str, Any]:
        return series.series(self.store.records.values())

    def dashboard(self) -> Dashboard:
        return Dashboard(
            panels=(
                Panel(
                    "rollouts", "Rollouts", lambda _: dashboard.board(self.store.records.values(), self.ctx.clock.now())
                ),
            ),
            timeline=lambda: dashboard.moments(self.store.records.values()),
        )
