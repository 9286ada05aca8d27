"""The leader's level-based reconcile of the active rollout: each tick reads the rollout's record and the
fleet as they are and takes the wave's next step (plan, drain, upgrade, bake and judge), or rolls back.

Every step is written (``RolloutStore.save``) before it acts, so a new leader resumes a rollout mid-wave:
commands it finds already sent are followed by id, not sent again; the cordons a step wants are set again
once per leader term (``hold_cordons``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from statistics import fmean

import structlog
from msgspec.structs import replace

from myolo.coordinator.commands.interface import CommandSender
from myolo.coordinator.cordons.interface import AutoCordons
from myolo.coordinator.core.context import Context
from myolo.coordinator.fleet.interface import FleetNodes
from myolo.coordinator.jobs.interface import JobsAPI
from myolo.coordinator.rollouts import bake, gates
from myolo.coordinator.rollouts.evidence import Evidence
from myolo.coordinator.rollouts.records import ROLLOUT_BY, RolloutRecord, Step, Wave
from myolo.coordinator.rollouts.store import RolloutStore
from myolo.events.payloads.commands import RollbackArgs, UpgradeArgs, UpgradeResult
from myolo.events.payloads.models import GateResult

log = structlog.get_logger("myolo.coordinator.rollouts")
LEARN_AFTER_END_S = 600.0  # how long a rolled-back rollout still records why its nodes took the release back
CLOCK_SKEW_S = 60.0  # how far a node's clock may lag the coordinator's when its report is matched to a wave
StepHandler = Callable[[RolloutRecord, Wave, float], Awaitable[None]]


class Reconciler:
    """Steps the active rollout towards its next wave, or back (the leader only; the caller holds the lock)."""

    def __init__(
        self,
        ctx: Context,
        store: RolloutStore,
        evidence: Evidence,
        fleet: FleetNodes,
        jobs: JobsAPI,
        commands: CommandSender,
        cordons: AutoCordons,
    ) -> None:
        self.ctx = ctx
        self.store = store
        self.evidence = evidence
        self.fleet = fleet
        self.jobs = jobs
        self.commands = commands
        self.cordons = cordons
        # (leader epoch, rollout, wave, step) whose cordons this leader has set as the step wants them
        self._cordons_held: set[tuple[int | None, str, int, Step]] = set()
        # a wave's step -> what the leader does in it (a passed or failed wave has none)
        self._steps: dict[Step, StepHandler] = {
            "pending": self._plan_wave,
            "draining": self._drain,
            "upgrading": self._upgrading,
            "baking": self._baking,
        }

    async def reconcile(self, now: float) -> None:
        for ended in self.store.rollouts():
            if ended.terminal and ended.status.failed_gate and now - ended.status.updated < LEARN_AFTER_END_S:
                await self._learn_taken_back(ended)
        rec = self.store.active()
        if rec is None or rec.status.phase == "Paused":
            return
        if rec.status.phase == "RollingBack":
            await self.rolling_back(rec, now)
            return
        wave = rec.status.waves[rec.status.wave]
        handler = self._steps.get(wave.step)
        if handler is not None:  # a passed or failed wave has nothing left to do
            await self._hold_cordons(rec, wave)
            await handler(rec, wave, now)

    async def _hold_cordons(self, rec: RolloutRecord, wave: Wave) -> None:
        """Once per leader term and step, set the wave's cordons as its step wants them: cordoned while it
        drains and upgrades, uncordoned from the bake on. Each step's transition calls it after recording the
        step; a leader that died in between left the cordons unchanged, and its successor sets them here."""
        key = (self.ctx.leadership.epoch, rec.name, wave.index, wave.step)
        if key in self._cordons_held:
            return
        self._cordons_held = {k for k in self._cordons_held if k[1] == rec.name} | {key}
        for n in wave.nodes:
            if wave.step in ("draining", "upgrading"):  # the cordons' writer skips a node already cordoned
                self.cordons.cordon_automatically(n, f"rollout {rec.name}: wave {wave.index + 1}", ROLLOUT_BY)
            elif wave.step == "baking" and self.fleet.node(n) is not None:
                await self.cordons.uncordon_automatically(
                    n, f"rollout {rec.name}: wave {wave.index + 1} upgraded", ROLLOUT_BY
                )

    async def _plan_wave(self, rec: RolloutRecord, wave: Wave, now: float) -> None:
        """``pending``: note each node's version and the jobs' throughput before the wave, cordon its nodes."""
        previous = {n: (s.agent_version if (s := self.fleet.node(n)) else None) or "" for n in wave.nodes}
        since = now - rec.spec.plan.baseline_s
        jobs = self.jobs.jobs_on(wave.nodes)
        baseline = {j: fmean(rates) for j in jobs if (rates := self.evidence.rates(j, since, now))}
        wave = replace(wave, previous=previous, baseline=baseline, step="draining", started=now, step_since=now)
        reason = f"wave {wave.index + 1}: cordon and drain {', '.join(wave.nodes)}"
        rec = await self.store.save(rec, rec.status.phase, reason, waves=rec.with_wave(wave))
        await self._hold_cordons(rec, wave)

    async def _drain(self, rec: RolloutRecord, wave: Wave, now: float) -> None:
        """``draining``: once the wave's nodes run no job (or the drain timed out), send each its upgrade."""
        left = set(wave.nodes) & self.jobs.busy_nodes()
        if left and now - (wave.step_since or now) < rec.spec.plan.drain_timeout_s:
            return
        commands = dict(wave.commands)
        for n in wave.nodes:
            if n in commands:
                continue
            args = UpgradeArgs(
                component=rec.spec.component,  # type: ignore[arg-type]
                version=rec.spec.version,
                artifact=rec.spec.artifact,
                sha256=rec.spec.sha256,
                rollout=rec.name,
            )
            try:
                intent = await self.commands.issue(n, args)
            except ValueError as exc:
                gate = GateResult(gate="upgrade", passed=False, detail=str(exc))
                await self._fail(rec, replace(wave, commands=commands), gate, now)
                return
            commands[n] = intent.command_id
        wave = replace(wave, commands=commands, step="upgrading", step_since=now)
        why = f"still running jobs after {rec.spec.plan.drain_timeout_s:.0f} s: {sorted(left)}; " if left else ""
        reason = f"wave {wave.index + 1}: {why}upgrade sent to {len(wave.nodes)} node(s)"
        rec = await self.store.save(rec, rec.status.phase, reason, waves=rec.with_wave(wave))
        await self._hold_cordons(rec, wave)

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
        if rec.spec.component == "agent" and node.agent_version != rec.spec.version:
            return f"reports version {node.agent_version}"
        if rec.spec.component == "agent" and node.agent_on_trial is not None:
            return f"runs {node.agent_on_trial} on trial: not committed yet"
        return None

    def _broken(self, rec: RolloutRecord, node_id: str, command_id: str, sent: float) -> str | None:
        """Why the node will not come back on the new version without waiting out ``upgrade_timeout_s``: its
        upgrade failed, it went Lost, or it switched back from the release by itself (a trial of it that ended
        after the upgrade was ``sent``, give or take the nodes' clock skew, failed)."""
        taken_back = self._taken_back(rec, node_id, sent)  # what the node says: the richest account
        if taken_back is not None:
            return taken_back
        intent = self.commands.intent(command_id)
        if intent is not None and intent.outcome == "failed":
            return f"upgrade {intent.status}: {intent.reason}"
        node = self.fleet.node(node_id)
        if node is not None and node.liveness == "Lost":
            return "went Lost after its upgrade was sent"
        return None

    def _taken_back(self, rec: RolloutRecord, node_id: str, since: float) -> str | None:
        """What the node says of the rollout's release when it switched back from it by itself after
        ``since`` (give or take the nodes' clock skew); None when it did not."""
        node = self.fleet.node(node_id)
        spec = (rec.spec.component, rec.spec.version)
        failed = next(
            (
                f
                for f in (node.failed_releases if node else ())
                if (f.component, f.version) == spec and f.at >= since - CLOCK_SKEW_S
            ),
            None,
        )
        if failed is None:
            return None
        back = failed.restored or "its base install"
        last = " ".join(failed.error.split())[-300:]
        what = "start(s)" if failed.component == "agent" else "job check(s)"
        return (
            f"switched {failed.component} {failed.version} back to {back} by itself: it never committed in "
            f"{failed.tries} {what}"
            + (f"; the last: {failed.reason}" if failed.reason else "")
            + (f"; its output ended: {last}" if last else "")
        )

    async def _upgrading(self, rec: RolloutRecord, wave: Wave, now: float) -> None:
        """``upgrading``: wait until every node is back healthy on the new version, then uncordon and bake."""
        lacking = {n: why for n, c in wave.commands.items() if (why := self._back(rec, n, c))}
        sent = wave.step_since or now
        broken = {n: why for n, c in wave.commands.items() if (why := self._broken(rec, n, c, sent))}
        if broken:
            detail = "; ".join(f"{n}: {why}" for n, why in sorted(broken.items()))
            await self._fail(rec, wave, GateResult(gate="upgrade", passed=False, detail=detail), now)
            return
        if lacking:
            if now - (wave.step_since or now) > rec.spec.plan.upgrade_timeout_s:
                detail = f"not back within {rec.spec.plan.upgrade_timeout_s:.0f} s: " + "; ".join(
                    f"{n}: {why}" for n, why in sorted(lacking.items())
                )
                await self._fail(rec, wave, GateResult(gate="health", passed=False, detail=detail), now)
            return
        healthy = GateResult(
            gate="health", passed=True, detail=f"{len(wave.nodes)} node(s) Ready on {rec.spec.version}"
        )
        wave = replace(
            wave, step="baking", step_since=now, upgraded_at=now, bake_until=now + rec.spec.plan.bake_s, gates=[healthy]
        )
        reason = f"wave {wave.index + 1}: upgraded and healthy; uncordoned, baking"
        rec = await self.store.save(rec, rec.status.phase, reason, waves=rec.with_wave(wave))
        await self._hold_cordons(rec, wave)

    async def _baking(self, rec: RolloutRecord, wave: Wave, now: float) -> None:
        """``baking``: a FAIL node or fault ends the wave at once; at the bake's end, judge every gate."""
        nodes, since = set(wave.nodes), wave.upgraded_at or now
        taken_back = {n: why for n in wave.nodes if (why := self._taken_back(rec, n, wave.started or since))}
        if taken_back:
            detail = "; ".join(f"{n}: {why}" for n, why in sorted(taken_back.items()))
            await self._fail(rec, wave, GateResult(gate="health", passed=False, detail=detail), now)
            return
        sick = [
            n for n in wave.nodes if (s := self.fleet.node(n)) is None or s.liveness == "Lost" or s.health == "fail"
        ]
        if sick:
            detail = f"{', '.join(sick)} failing or Lost during the bake"
            await self._fail(rec, wave, GateResult(gate="health", passed=False, detail=detail), now)
            return
        fault = self.evidence.faults_gate(nodes, since, now)
        if fault.passed is False:
            await self._fail(rec, wave, fault, now)
            return
        if now < (wave.bake_until or now):
            return
        starts = bake.window_starts(self.jobs.trainings(), wave.baseline, since)
        if not bake.over(starts, since, now, rec.spec.plan.bake_s, rec.spec.plan.upgrade_timeout_s):
            return  # a job the wave displaced is not training again yet, or not for bake_s
        during = {j: self.evidence.rates(j, since if s is None else s, now) for j, s in starts.items()}
        judged = [
            fault,
            self.evidence.leaks_gate(nodes, since, now, rec.spec.plan.leak_pct_per_h),
            gates.throughput(wave.baseline, during, rec.spec.plan.throughput_tolerance),
        ]
        wave = replace(wave, gates=[*wave.gates[:1], *judged])
        failed = next((g for g in judged if g.passed is False), None)
        if failed is not None:
            await self._fail(rec, wave, failed, now)
            return
        waves = rec.with_wave(replace(wave, step="passed"))
        if wave.index + 1 == len(rec.status.waves):
            reason = f"every wave passed: {len(rec.upgraded_nodes())} node(s) on {rec.spec.version}"
            await self.store.save(rec, "Succeeded", reason, waves=waves)
            return
        reason = f"wave {wave.index + 1} passed its gates; wave {rec.status.wave + 2} next"
        await self.store.save(rec, rec.status.phase, reason, waves=waves, wave=rec.status.wave + 1)

    async def _fail(self, rec: RolloutRecord, wave: Wave, gate: GateResult, now: float) -> None:
        wave = replace(wave, step="failed", gates=[*[g for g in wave.gates if g.gate != gate.gate], gate])
        reason = f"gate {gate.gate} failed on wave {wave.index + 1}: {gate.detail}"
        rec = await self.store.save(
            rec, "RollingBack", reason, waves=rec.with_wave(wave), failed_gate=gate, ending="RolledBack"
        )
        log.warning("rollout gate failed", rollout=rec.name, wave=wave.index + 1, gate=gate.gate, detail=gate.detail)
        await self.rolling_back(rec, now)

    async def rolling_back(self, rec: RolloutRecord, now: float) -> RolloutRecord:
        """Send each upgraded node a rollback to what it ran before (once), then lift the rollout's cordons."""
        sent = False
        waves = []
        for wave in rec.status.waves:
            rollbacks = dict(wave.rollbacks)
            for n, cmd in wave.commands.items():
                if n in rollbacks:
                    continue
                intent = self.commands.intent(cmd)
                result = intent.typed_result() if intent else None
                before = (result.previous if isinstance(result, UpgradeResult) else None) or wave.previous.get(n)
                if not before or (intent is not None and intent.outcome == "failed"):
                    rollbacks[n] = ""  # it never switched (or we never knew its version): nothing to undo
                    continue
                back = RollbackArgs(component=rec.spec.component, version=str(before), rollout=rec.name)  # type: ignore[arg-type]
                try:
                    rollbacks[n] = (await self.commands.issue(n, back)).command_id
                except ValueError as exc:
                    log.error("rollback not sent", rollout=rec.name, node=n, error=str(exc))
                    rollbacks[n] = ""
                sent = True
            waves.append(replace(wave, rollbacks=rollbacks) if rollbacks != wave.rollbacks else wave)
        if sent:
            reason = f"rollback sent to {len(rec.upgraded_nodes())} node(s)"
            return await self.store.save(rec, "RollingBack", reason, waves=waves)
        rec = await self._learn_taken_back(rec)
        pending = [
            c for w in waves for c in w.rollbacks.values() if c and (i := self.commands.intent(c)) and not i.terminal
        ]
        if pending:
            return rec
        missing = {n: why for w in waves for n, c in w.rollbacks.items() if c and (why := self._not_back(rec, c))}
        since = next((c.time for c in reversed(rec.status.history) if c.phase != "RollingBack"), rec.created)
        if missing and now - since < rec.spec.plan.upgrade_timeout_s:
            return rec  # a node still restarting, or on trial: its cordon stays until it is back
        for wave in rec.status.waves:
            for n in wave.nodes:
                if n not in missing:
                    await self.cordons.uncordon_automatically(n, f"rollout {rec.name} ended", ROLLOUT_BY)
        gate = rec.status.failed_gate
        why = f"gate {gate.gate}: {gate.detail}" if gate else rec.status.reason
        told = "; ".join(f"{n}: {t}" for n, t in sorted(rec.status.taken_back.items()) if t not in why)
        left = "; ".join(f"{n} left cordoned: {w}" for n, w in sorted(missing.items()))
        reason = f"rolled back ({why})" + "".join(f"; {t}" for t in (told, left) if t)
        return await self.store.save(rec, rec.status.ending, reason, waves=waves)

    def _not_back(self, rec: RolloutRecord, rollback: str) -> str | None:
        """None when the node the ``rollback`` command went to runs the version it names again, Ready and
        committed; else what it lacks. A failed rollback is a node that needs a person."""
        intent = self.commands.intent(rollback)
        if intent is None:
            return None
        node = self.fleet.node(intent.node_id)
        version = intent.args.version if isinstance(intent.args, RollbackArgs) else None
        if node is None or node.liveness != "Ready":
            lack = f"not Ready ({node.liveness if node else 'unknown'})"
        elif rec.spec.component == "agent" and (node.agent_version != version or node.agent_on_trial):
            lack = f"runs {node.agent_version}{' on trial' if node.agent_on_trial else ''}, not {version}"
        else:
            return None  # back, whichever way it got there (its rollback, or its launcher first)
        failed = f"; its rollback {intent.status}: {intent.reason}" if intent.outcome == "failed" else ""
        return lack + failed

    async def _learn_taken_back(self, rec: RolloutRecord) -> RolloutRecord:
        """A node of the rollout that switched back from the release by itself says why (its trial's last
        error): recorded once, so the record names the cause even when the gate failed first on Lost."""
        learnt = dict(rec.status.taken_back)
        for wave in rec.status.waves:
            for n in wave.commands:
                if n not in learnt and (why := self._taken_back(rec, n, wave.started or rec.created)):
                    learnt[n] = why
        if learnt == rec.status.taken_back:
            return rec
        new = sorted(set(learnt) - set(rec.status.taken_back))
        reason = "; ".join(f"{n}: {learnt[n]}" for n in new)
        return await self.store.save(rec, rec.status.phase, reason, taken_back=learnt)
