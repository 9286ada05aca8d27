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
from collections import deque
from pathlib import Path
from statistics import fmean
from typing import Any

import msgspec
import structlog

from coordinator.commands.interface import CommandSender
from coordinator.cordons.interface import AutoCordons
from coordinator.core.component import Component, RouteSet, StateTopic
from coordinator.core.context import Context
from coordinator.fleet.interface import FleetNodes
from coordinator.jobs.interface import JobsAPI
from coordinator.rollouts import gates, routes
from coordinator.rollouts.config import Plan, RolloutsConfig, check
from coordinator.rollouts.interface import RolloutError
from coordinator.rollouts.plan import waves
from coordinator.rollouts.records import MAX_HISTORY, ROLLOUT_BY, Change, RolloutRecord, Wave
from events.bus import RecordInfo
from events.envelope import Event
from events.payloads import LeakReport, NodeFault, ReleasePublished
from events.payloads.commands import RollbackArgs, UpgradeArgs
from events.payloads.models import GateResult, RolloutPhaseChanged
from events.topics import STATE_ROLLOUTS

log = structlog.get_logger("myolo.coordinator.rollouts")
EVIDENCE = 100_000  # faults and leak reports kept (the newest)


def _series(r: LeakReport) -> str:
    """A leak report's memory series, readable: ``gpu 0``, ``pid 88 on gpu 1``, ``host rss of pid 88``."""
    if r.subject == "gpu":
        return f"gpu {r.gpu_index}"
    if r.subject == "process_gpu":
        return f"pid {r.pid} on gpu {r.gpu_index}"
    return f"host rss of pid {r.pid}"


class Rollouts(Component):
    name = "rollouts"
    config = RolloutsConfig
    openapi = Path(__file__).with_name("openapi.yaml")
    consumes = (ReleasePublished, NodeFault, LeakReport)
    owns = (StateTopic(STATE_ROLLOUTS, {"rollout": RolloutRecord}),)

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.cfg: RolloutsConfig = ctx.config
        self.fleet = ctx.peers.require(FleetNodes)
        self.jobs = ctx.peers.require(JobsAPI)
        self.commands = ctx.peers.require(CommandSender)
        self.cordons = ctx.peers.require(AutoCordons)
        self.records: dict[str, RolloutRecord] = {}
        self.faults: deque[gates.Fault] = deque(maxlen=EVIDENCE)
        self.leaks: deque[gates.Leak] = deque(maxlen=EVIDENCE)
        self.throughput: dict[str, deque[tuple[float, float]]] = {}
        self._seen_progress: dict[str, float] = {}
        self._lock = asyncio.Lock()

    @classmethod
    def check_config(cls, section: RolloutsConfig, core: Any) -> None:
        check(section, core)

    # ---- RolloutsAPI ----------------------------------------------------------------------------------------
    def rollouts(self) -> list[RolloutRecord]:
        return sorted(self.records.values(), key=lambda r: (-r.created, r.name))

    def rollout(self, name: str) -> RolloutRecord | None:
        return self.records.get(name)

    def active(self) -> RolloutRecord | None:
        return next((r for r in self.rollouts() if not r.terminal), None)

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
                raise RolloutError(
                    "version",
                    f"rollout {busy.name} is {busy.phase}; one rollout at a time (pause or abort it first)",
                    409,
                )
            name = f"{component}-{version}"
            if name in self.records:
                name = f"{name}-{len([n for n in self.records if n.startswith(name)]) + 1}"
            if len(self.records) >= self.cfg.max_rollouts:
                raise RolloutError("name", f"{self.cfg.max_rollouts} rollouts are recorded (rollouts.max_rollouts)")
            plan = plan or self.cfg.plan
            nodes, skipped = [], {}
            for node in self.fleet.nodes():
                if node.schedulable:
                    nodes.append(node.node_id)
                else:
                    skipped[node.node_id] = "cordoned" if node.cordoned else f"{node.liveness}, health {node.health}"
            if not nodes:
                raise RolloutError("nodes", f"no node is Ready and uncordoned to upgrade (skipped: {skipped})", 409)
            planned = waves(nodes, self._busy_nodes(), plan.waves)
            now = self.ctx.clock.now()
            rec = RolloutRecord(
                name=name,
                component=component,
                version=version,
                artifact=artifact,
                sha256=sha256,
                created=now,
                updated=now,
                by=by,
                source=source,
                plan=plan,
                waves=[Wave(index=i, percent=p, nodes=ns) for i, (p, ns) in enumerate(planned)],
                skipped=skipped,
            )
            sizes = "/".join(str(len(w.nodes)) for w in rec.waves)
            await self._save(rec, "Progressing", f"planned {len(rec.waves)} wave(s) of {sizes} node(s)", by)
            log.info("rollout started", rollout=name, version=version, waves=sizes, by=by)
            return rec

    async def act(self, name: str, action: str, by: str) -> RolloutRecord:
        self.ctx.leadership.require()
        async with self._lock:
            rec = self.records.get(name)
            if rec is None:
                raise RolloutError("name", f"no rollout named {name!r} (myoloctl rollout history lists them)", 404)
            if action == "pause":
                self._expect(rec, action, ("Progressing",))
                await self._save(rec, "Paused", "paused", by)
            elif action == "resume":
                self._expect(rec, action, ("Paused",))
                await self._save(rec, "Progressing", "resumed", by)
            elif action in ("abort", "undo"):
                allowed = ("Progressing", "Paused") if action == "abort" else ("Progressing", "Paused", "Succeeded")
                self._expect(rec, action, allowed)
                rec.ending = "Aborted" if action == "abort" else "RolledBack"
                await self._save(rec, "RollingBack", f"{action} by {by}: rolling the upgraded nodes back", by)
                await self._rolling_back(rec, self.ctx.clock.now())
            else:
                raise RolloutError("action", f"{action!r} is not one of pause, resume, abort, undo")
            return rec

    @staticmethod
    def _expect(rec: RolloutRecord, action: str, phases: tuple[str, ...]) -> None:
        if rec.phase not in phases:
            raise RolloutError("phase", f"cannot {action} rollout {rec.name}: it is {rec.phase}", 409)

    # ---- evidence (every coordinator) -----------------------------------------------------------------------
    async def on_event(self, event: Event, info: RecordInfo) -> None:
        data, now = event.data, self.ctx.clock.now()
        if isinstance(data, NodeFault) and data.health == "fail":
            self.faults.append(gates.Fault(now, data.node_id, "; ".join(data.reasons) or data.kind))
        elif isinstance(data, LeakReport):
            series = _series(data)
            self.leaks.append(gates.Leak(now, data.node_id, series, data.slope_pct_per_h, data.lower_pct_per_h))
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

    def _sample_throughput(self, now: float) -> None:
        for job in self.jobs.jobs():
            gen, p = job.generation, job.progress
            if gen is None or gen.stage != "running" or p.tokens_per_s is None or p.updated is None:
                continue
            if self._seen_progress.get(job.name) == p.updated:
                continue
            self._seen_progress[job.name] = p.updated
            self.throughput.setdefault(job.name, deque(maxlen=10_000)).append((now, p.tokens_per_s))

    def _mean_rate(self, job: str, since: float, until: float) -> list[float]:
        return [v for t, v in self.throughput.get(job, ()) if since <= t <= until]

    def _busy_nodes(self) -> set[str]:
        return {
            n for j in self.jobs.jobs() if j.generation is not None and not j.terminal for n in j.generation.node_ids
        }

    def _jobs_on(self, nodes: set[str]) -> list[str]:
        return [
            j.name
            for j in self.jobs.jobs()
            if j.generation is not None and not j.terminal and nodes & set(j.generation.node_ids)
        ]

    # ---- the leader's steps ---------------------------------------------------------------------------------
    async def tick(self, now: float) -> None:
        self._sample_throughput(now)
        if not self.ctx.leadership.is_leader:
            return
        async with self._lock:
            rec = self.active()
            if rec is None or rec.phase == "Paused":
                return
            if rec.phase == "RollingBack":
                await self._rolling_back(rec, now)
            else:
                await self._step(rec, rec.waves[rec.wave], now)

    async def _step(self, rec: RolloutRecord, wave: Wave, now: float) -> None:
        nodes = set(wave.nodes)
        if wave.step == "pending":
            wave.previous = {n: (s.agent_version if (s := self.fleet.node(n)) else None) or "" for n in wave.nodes}
            since = now - rec.plan.baseline_s
            wave.baseline = {j: fmean(rates) for j in self._jobs_on(nodes) if (rates := self._mean_rate(j, since, now))}
            wave.step, wave.started, wave.step_since = "draining", now, now
            await self._save(rec, rec.phase, f"wave {wave.index + 1}: cordon and drain {', '.join(wave.nodes)}")
            for n in wave.nodes:
                self.cordons.cordon_automatically(n, f"rollout {rec.name}: wave {wave.index + 1}", ROLLOUT_BY)
        elif wave.step == "draining":
            left = nodes & self._busy_nodes()
            if left and now - (wave.step_since or now) < rec.plan.drain_timeout_s:
                return
            for n in wave.nodes:
                if n in wave.commands:
                    continue
                args = UpgradeArgs(
                    component=rec.component,  # type: ignore[arg-type]
                    version=rec.version,
                    artifact=rec.artifact,
                    sha256=rec.sha256,
                    rollout=rec.name,
                )
                try:
                    intent = await self.commands.issue(n, args)
                except ValueError as exc:
                    await self._fail(rec, wave, GateResult(gate="upgrade", passed=False, detail=str(exc)), now)
                    return
                wave.commands[n] = intent.command_id
            wave.step, wave.step_since = "upgrading", now
            why = f"still running jobs after {rec.plan.drain_timeout_s:.0f} s: {sorted(left)}; " if left else ""
            await self._save(rec, rec.phase, f"wave {wave.index + 1}: {why}upgrade sent to {len(wave.nodes)} node(s)")
        elif wave.step == "upgrading":
            await self._upgrading(rec, wave, now)
        elif wave.step == "baking":
            await self._baking(rec, wave, now)

    def _back(self, rec: RolloutRecord, node_id: str, command_id: str) -> str | None:
        """None when the node is back healthy on the new version; else what it still lacks."""
        intent = self.commands.intent(command_id)
        if intent is None or intent.outcome == "failed":
            return f"upgrade {intent.status if intent else 'lost'}: {intent.reason if intent else 'no record'}"
        if intent.outcome != "done":
            return f"upgrade {intent.status}"
        node = self.fleet.node(node_id)
        if node is None or node.liveness != "Ready" or node.health == "fail":
            state = f"{node.liveness}, health {node.health}" if node else "unknown"
            return f"not healthy ({state}: {'; '.join(node.health_reasons) if node else ''})"
        if rec.component == "agent" and node.agent_version != rec.version:
            return f"reports version {node.agent_version}"
        return None

    async def _upgrading(self, rec: RolloutRecord, wave: Wave, now: float) -> None:
        lacking = {n: why for n, c in wave.commands.items() if (why := self._back(rec, n, c))}
        broken = {
            n: lacking[n] for n, c in wave.commands.items() if (i := self.commands.intent(c)) and i.outcome == "failed"
        }
        if broken:
            detail = "; ".join(f"{n}: {why}" for n, why in sorted(broken.items()))
            await self._fail(rec, wave, GateResult(gate="upgrade", passed=False, detail=detail), now)
            return
        if lacking:
            if now - (wave.step_since or now) > rec.plan.upgrade_timeout_s:
                detail = f"not back within {rec.plan.upgrade_timeout_s:.0f} s: " + "; ".join(
                    f"{n}: {why}" for n, why in sorted(lacking.items())
                )
                await self._fail(rec, wave, GateResult(gate="health", passed=False, detail=detail), now)
            return
        wave.step, wave.step_since, wave.upgraded_at = "baking", now, now
        wave.bake_until = now + rec.plan.bake_s
        wave.gates = [
            GateResult(gate="health", passed=True, detail=f"{len(wave.nodes)} node(s) Ready on {rec.version}")
        ]
        await self._save(rec, rec.phase, f"wave {wave.index + 1}: upgraded and healthy; uncordoned, baking")
        for n in wave.nodes:
            await self.cordons.uncordon_automatically(
                n, f"rollout {rec.name}: wave {wave.index + 1} upgraded", ROLLOUT_BY
            )

    async def _baking(self, rec: RolloutRecord, wave: Wave, now: float) -> None:
        nodes, since = set(wave.nodes), wave.upgraded_at or now
        sick = [
            n for n in wave.nodes if (s := self.fleet.node(n)) is None or s.liveness == "Lost" or s.health == "fail"
        ]
        if sick:
            detail = f"{', '.join(sick)} failing or Lost during the bake"
            await self._fail(rec, wave, GateResult(gate="health", passed=False, detail=detail), now)
            return
        fault = gates.faults(self.faults, nodes, since, now)
        if fault.passed is False:
            await self._fail(rec, wave, fault, now)
            return
        if now < (wave.bake_until or now):
            return
        during = {j: self._mean_rate(j, since, now) for j in wave.baseline}
        judged = [
            fault,
            gates.leaks(self.leaks, nodes, since, now, rec.plan.leak_pct_per_h),
            gates.throughput(wave.baseline, during, rec.plan.throughput_tolerance),
        ]
        wave.gates = [*wave.gates[:1], *judged]
        failed = next((g for g in judged if g.passed is False), None)
        if failed is not None:
            await self._fail(rec, wave, failed, now)
            return
        wave.step = "passed"
        if wave.index + 1 == len(rec.waves):
            await self._save(
                rec, "Succeeded", f"every wave passed: {len(rec.upgraded_nodes())} node(s) on {rec.version}"
            )
            return
        rec.wave += 1
        await self._save(rec, rec.phase, f"wave {wave.index + 1} passed its gates; wave {rec.wave + 1} next")

    async def _fail(self, rec: RolloutRecord, wave: Wave, gate: GateResult, now: float) -> None:
        wave.step = "failed"
        wave.gates = [*[g for g in wave.gates if g.gate != gate.gate], gate]
        rec.failed_gate, rec.ending = gate, "RolledBack"
        await self._save(rec, "RollingBack", f"gate {gate.gate} failed on wave {wave.index + 1}: {gate.detail}")
        log.warning("rollout gate failed", rollout=rec.name, wave=wave.index + 1, gate=gate.gate, detail=gate.detail)
        await self._rolling_back(rec, now)

    async def _rolling_back(self, rec: RolloutRecord, now: float) -> None:
        """Send each upgraded node a rollback to what it ran before (once), then lift the rollout's cordons."""
        sent = False
        for wave in rec.waves:
            for n, cmd in wave.commands.items():
                if n in wave.rollbacks:
                    continue
                intent = self.commands.intent(cmd)
                before = (intent.result.get("previous") if intent else None) or wave.previous.get(n)
                if not before or (intent is not None and intent.outcome == "failed"):
                    wave.rollbacks[n] = ""  # it never switched (or we never knew its version): nothing to undo
                    continue
                back = RollbackArgs(component=rec.component, version=str(before), rollout=rec.name)  # type: ignore[arg-type]
                try:
                    wave.rollbacks[n] = (await self.commands.issue(n, back)).command_id
                except ValueError as exc:
                    log.error("rollback not sent", rollout=rec.name, node=n, error=str(exc))
                    wave.rollbacks[n] = ""
                sent = True
        if sent:
            await self._save(rec, "RollingBack", f"rollback sent to {len(rec.upgraded_nodes())} node(s)")
            return
        pending = [
            c
            for w in rec.waves
            for c in w.rollbacks.values()
            if c and (i := self.commands.intent(c)) and not i.terminal
        ]
        if pending:
            return
        for wave in rec.waves:
            for n in wave.nodes:
                await self.cordons.uncordon_automatically(n, f"rollout {rec.name} ended", ROLLOUT_BY)
        gate = rec.failed_gate
        why = f"gate {gate.gate}: {gate.detail}" if gate else rec.reason
        await self._save(rec, rec.ending, f"rolled back ({why})")

    async def _save(self, rec: RolloutRecord, phase: str, reason: str, by: str = "auto") -> None:
        now = self.ctx.clock.now()
        rec.phase, rec.reason, rec.updated = phase, reason, now  # type: ignore[assignment]
        rec.history = [*rec.history, Change(time=now, phase=phase, wave=rec.wave, reason=reason, by=by)][-MAX_HISTORY:]
        await self.ctx.store.put(STATE_ROLLOUTS, rec.name, rec)
        self.records[rec.name] = rec
        wave = rec.waves[rec.wave] if rec.waves else None
        await self.ctx.producer.send(
            RolloutPhaseChanged(
                rollout=rec.name,
                component=rec.component,
                version=rec.version,
                phase=phase,
                wave=rec.wave + 1,
                waves=len(rec.waves),
                reason=reason[:2000],
                by=by,
                gates=wave.gates if wave else [],
            )
        )

    # ---- state, API -----------------------------------------------------------------------------------------
    def on_state(self, topic: str, key: str, record: msgspec.Struct | None, kind: str) -> None:
        if isinstance(record, RolloutRecord):
            self.records[record.name] = record
        elif record is None:
            self.records.pop(key, None)

    def api(self) -> RouteSet:
        return RouteSet(routes.routes(self), self.openapi, health=self._health, admin_routes=routes.ADMIN_ROUTES)

    def _health(self) -> dict[str, Any]:
        rec = self.active()
        return {"rollout": f"{rec.name} {rec.phase} wave {rec.wave + 1}/{len(rec.waves)}" if rec else None}

    def stats(self) -> dict[str, int]:
        return {"rollouts": len(self.records), "faults_seen": len(self.faults), "leak_reports_seen": len(self.leaks)}
