"""The jobs component: ElasticJobs in ``myolo.state.jobs``, scheduled by the leader onto healthy nodes.

Every coordinator follows the state topic and the jobs' progress (so a standby's view and API are current);
only the leader steps the jobs (``reconcile.Reconciler``) and answers writes. Worker faults and completions
are kept in memory per job and generation until the next step acts on them; a new leader does not need them:
it finds the generation as recorded and the fleet as it is.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import structlog
from msgspec.structs import replace

from myolo.coordinator.commands.interface import CommandSender
from myolo.coordinator.cordons.interface import AutoCordons
from myolo.coordinator.core.component import Component, RouteSet, StateTopic
from myolo.coordinator.core.context import Context
from myolo.coordinator.core.dashboard import Dashboard, Panel
from myolo.coordinator.fleet.interface import FleetNodes, NodeState
from myolo.coordinator.jobs import dashboard, routes, series
from myolo.coordinator.jobs.answers import job_answer
from myolo.coordinator.jobs.config import JobsConfig, check
from myolo.coordinator.jobs.interface import JobConflict, JobsAPI, UnknownJob
from myolo.coordinator.jobs.manifest import ElasticJobSpec, parse_manifest
from myolo.coordinator.jobs.nccl import NcclView, nccl_view
from myolo.coordinator.jobs.placement import replica_counts
from myolo.coordinator.jobs.policies import evaluate, straggler
from myolo.coordinator.jobs.profile import ProfileRequest, ProfileStarted, start_profile
from myolo.coordinator.jobs.queries import JobQueries
from myolo.coordinator.jobs.reconcile import Evidence, Reconciler, Resize, decide
from myolo.coordinator.jobs.records import STATE_JOBS, JobRecord, JobSpec, JobStatus, with_spec, with_status
from myolo.coordinator.jobs.runtime import JobRuntime
from myolo.events.bus import RecordInfo
from myolo.events.envelope import Event
from myolo.events.payloads import NodeSample, TrainingCompleted, TrainingFault, TrainingProgress

log = structlog.get_logger("myolo.coordinator.jobs")
# what may change in a running job's manifest (the rest is its training: a new job)
MAX_FAULTS = 64  # worker faults kept per job until the next step acts on them
MUTABLE = ("min_replicas", "max_replicas", "policies", "max_restarts", "labels")


class Jobs(JobQueries, Component):
    name = "jobs"
    requires = (
        FleetNodes,
        CommandSender,
        AutoCordons,
    )
    provides = (JobsAPI,)
    config = JobsConfig
    openapi = Path(__file__).with_name("openapi.yaml")
    consumes = (TrainingProgress, TrainingFault, TrainingCompleted)
    owns = (
        StateTopic(
            STATE_JOBS,
            {"job": JobRecord},
            partitions=6,
            key="job id",
            description="coordinator state: elastic jobs and their generations",
        ),
    )

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.cfg: JobsConfig = ctx.config
        self.fleet = ctx.need(FleetNodes)
        self.records: dict[str, JobRecord] = {}  # as on the state topic
        self.runtime: dict[str, JobRuntime] = {}  # what was heard of each job since (memory only)
        self.decisions: Counter[str] = Counter()  # decisions this coordinator wrote, by kind (GET /metrics)
        self._on_node: dict[str, set[str]] = {}  # node -> jobs with a member there
        self._lock = asyncio.Lock()
        self._applying: Counter[str] = Counter()  # job -> applies under way
        self.reconciler = Reconciler(
            self.cfg,
            self.fleet,
            ctx.need(CommandSender),
            ctx.need(AutoCordons),
            self._save,
            lambda: list(self.records.values()),
            ctx.clock,
        )
        self.fleet.on_applied(self._on_sample)

    @classmethod
    def check_config(cls, section: JobsConfig, core: Any) -> None:
        check(section, core)

    # ---- JobsAPI --------------------------------------------------------------------------------------------
    def jobs(self) -> tuple[JobRecord, ...]:
        return tuple(sorted(self.records.values(), key=lambda r: r.name))

    def job(self, name: str) -> JobRecord | None:
        return self.records.get(name)

    def applying(self, name: str) -> bool:
        return self._applying[name] > 0

    async def apply(self, manifest: str, by: str) -> tuple[JobRecord, bool]:
        spec = parse_manifest(manifest)
        self.ctx.leadership.require()
        self._applying[spec.name] += 1
        try:
            return await self._apply(spec, manifest, by)
        finally:
            self._applying[spec.name] -= 1
            if not self._applying[spec.name]:
                del self._applying[spec.name]

    async def _apply(self, spec: ElasticJobSpec, manifest: str, by: str) -> tuple[JobRecord, bool]:
        now = self.ctx.clock.now()
        async with self._lock:
            rec = self.records.get(spec.name)
            if rec is not None and not rec.terminal and not rec.spec.deleting:
                changed = [f for f in msgspec.structs.asdict(spec) if getattr(spec, f) != getattr(rec.spec.job, f)]
                fixed = [f for f in changed if f not in MUTABLE]
                if fixed:
                    raise JobConflict(
                        f"spec.{fixed[0]}" if fixed[0] != "trainer" else "spec.trainer",
                        f"cannot change on a running job (only replica bounds, policies, maxRestarts and labels "
                        f"can); delete job {spec.name} first or apply under another name",
                    )
                desired = rec.spec.desired_replicas
                if desired is not None and desired not in replica_counts(spec):
                    desired = None
                rec = with_spec(rec, job=spec, manifest=manifest, desired_replicas=desired)
                rec = decide(rec, "scale", f"manifest applied ({', '.join(changed) or 'unchanged'})", now, by=by)
                return await self._save(rec), False
            if rec is None and len(self.records) >= self.cfg.max_jobs:
                raise JobConflict("metadata.name", f"this coordinator holds {self.cfg.max_jobs} jobs (jobs.max_jobs)")
            rec = JobRecord(
                name=spec.name,
                created=now,
                spec=JobSpec(job=spec, manifest=manifest),
                status=JobStatus(updated=now, reason="waiting for its first placement"),
            )
            rec = await self._save(rec)
            self.runtime[spec.name] = JobRuntime()
            log.info("job applied", job=spec.name, by=by)
        return rec, True

    async def scale(self, name: str, replicas: int, by: str) -> JobRecord:
        self.ctx.leadership.require()
        async with self._lock:
            rec = self._live(name)
            allowed = replica_counts(rec.spec.job)
            if replicas not in allowed:
                raise ValueError(
                    f"replicas: {replicas} is not allowed for job {name}: between minReplicas {rec.spec.job.min_replicas} "
                    f"and maxReplicas {rec.spec.job.max_replicas}, dividing the global batch "
                    f"{rec.spec.job.trainer.data.global_batch}: one of {sorted(allowed)}"
                )
            # an operator's scale is not held back by the growth cooldown
            rec = with_status(with_spec(rec, desired_replicas=replicas), last_resize=None)
            rec = decide(rec, "scale", f"target set to {replicas} replica(s)", self.ctx.clock.now(), by=by)
            return await self._save(rec)

    def nccl(self, name: str) -> NcclView | None:
        rec = self.records.get(name)
        return nccl_view(rec, self.fleet.node) if rec is not None else None

    async def profile(self, name: str, req: ProfileRequest, by: str) -> ProfileStarted:
        self.ctx.leadership.require()
        rec = self._live(name)
        log.info("profile asked", job=name, rank=req.rank, duration_s=req.duration_s, by=by)
        return await start_profile(rec, req, self.fleet, self.reconciler.commands, self.ctx.clock)

    async def delete(self, name: str, by: str) -> JobRecord:
        self.ctx.leadership.require()
        async with self._lock:
            rec = self.records.get(name)
            if rec is None:
                raise UnknownJob(name)
            if not rec.spec.deleting:
                why = "deleted: its workers stop with a checkpoint"
                rec = decide(with_spec(rec, deleting=True), "delete", why, self.ctx.clock.now(), by=by)
                rec = await self._save(rec)
            return rec

    def _live(self, name: str) -> JobRecord:
        rec = self.records.get(name)
        if rec is None or rec.spec.deleting:
            raise UnknownJob(name)
        return rec

    # ---- state --------------------------------------------------------------------------------------------
    async def _save(self, rec: JobRecord) -> JobRecord:
        """Write ``rec`` (with the newest progress heard meanwhile), then keep it: memory never runs ahead of the
        state topic with a decision. Returns the record written."""
        mine = self.records.get(rec.name)
        progress = (
            mine.status.progress
            if mine is not None and mine.status.progress.step > rec.status.progress.step
            else rec.status.progress
        )
        rec = with_status(rec, updated=self.ctx.clock.now(), progress=progress)
        await self.ctx.store.put(STATE_JOBS, rec.name, rec)
        self.decisions.update(d.kind for d in series.new_decisions(mine, rec))
        self.records[rec.name] = rec
        self._index()
        return rec

    def on_state(self, topic: str, key: str, record: msgspec.Struct | None, kind: str) -> None:
        if self.ctx.leadership.is_leader:
            return  # memory is ahead of the log: we wrote it
        if record is None:
            self._forget(key)
        elif isinstance(record, JobRecord):
            mine = self.records.get(key)
            if mine is not None and mine.status.progress.step > record.status.progress.step:
                record = with_status(
                    record, progress=mine.status.progress
                )  # our own reading of the progress may be newer
            self.records[key] = record
            self._runtime(key)
        self._index()

    def _runtime(self, name: str) -> JobRuntime:
        return self.runtime.setdefault(name, JobRuntime())

    def _forget(self, name: str) -> None:
        """A job gone: its record and everything heard of it."""
        self.records.pop(name, None)
        self.runtime.pop(name, None)
        self._index()

    # ---- events -------------------------------------------------------------------------------------------
    async def on_event(self, event: Event, info: RecordInfo) -> None:
        data = event.data
        rec = self.records.get(getattr(data, "job_id", ""))
        gen = rec.status.generation if rec is not None else None
        if rec is None or gen is None or data.generation != gen.number:
            return  # another job's, or an older generation's (already stopped)
        now = self.ctx.clock.now()
        if isinstance(data, TrainingProgress):
            self._progress(rec, data, now)
            if gen.first_step_at is None and self.ctx.leadership.is_leader:
                async with self._lock:
                    await self._first_step(rec.name, data, now)
            return
        evidence = self._runtime(rec.name).evidence
        if isinstance(data, TrainingFault):
            if len(evidence.faults) < MAX_FAULTS:  # the first ones tell the cause; a standby never drains them
                evidence.faults.append(data)
            if evidence.first_fault_at is None:
                evidence.first_fault_at = now
        elif isinstance(data, TrainingCompleted):
            evidence.completed[data.node_id] = data
        if self.ctx.leadership.is_leader:
            await self._step(rec.name, now)  # act now, not at the next tick

    async def _first_step(self, name: str, p: TrainingProgress, now: float) -> None:
        """Record when the generation trained its first step, and from which (once per generation)."""
        rec = self.records.get(name)
        gen = rec.status.generation if rec is not None else None
        if rec is None or gen is None or gen.number != p.generation or gen.first_step_at is not None:
            return
        await self._save(with_status(rec, generation=replace(gen, first_step_at=now, resumed_from=p.step - 1)))

    def _progress(self, rec: JobRecord, p: TrainingProgress, now: float) -> None:
        """The job's latest numbers. Observations, not decisions: kept in memory at once and written with the
        job's next record."""
        runtime = self._runtime(rec.name)
        runtime.metrics.add_progress(p, now)
        rates = runtime.rates
        rates[p.dp_rank] = p.tokens_per_s
        prev = rec.status.progress
        if p.allreduce_busbw_gbps is not None:  # the first step of a generation, which may redo older steps
            prev = replace(prev, allreduce_busbw_gbps=p.allreduce_busbw_gbps, allreduce_generation=p.generation)
            rec = self.records[rec.name] = with_status(rec, progress=prev)
        if p.step >= prev.step:
            progress = replace(
                prev,
                step=p.step,
                loss=p.loss if p.dp_rank == 0 or prev.loss is None or p.step > prev.step else prev.loss,
                # each replica reports the job's rate (global batch tokens / its step time): their mean is the job's
                tokens_per_s=sum(rates.values()) / len(rates),
                step_time_s=p.step_time_s,
                gradient_staleness=p.gradient_staleness,
                updated=now,
            )
            self.records[rec.name] = with_status(rec, progress=progress)

    def _on_sample(self, node: NodeState, event: Event) -> None:
        """GPU utilisation for the policies, and whether the generation's workers still run on the node (a
        lost fault event must not leave a job waiting for progress that will never come)."""
        sample = event.data
        if not isinstance(sample, NodeSample):
            return
        now = self.ctx.clock.now()
        for name in self._on_node.get(node.node_id, ()):
            rec = self.records.get(name)
            gen = rec.status.generation if rec is not None else None
            member = gen.member(node.node_id) if gen is not None and gen.stage == "running" else None
            if member is None or gen is None:
                continue
            runtime = self._runtime(name)
            runtime.metrics.add_gpu_util(node.node_id, member.gpus, sample, now)
            if sample.workers is not None:
                alive = any(
                    w.job_id == name and w.generation == gen.number and w.state in ("starting", "running")
                    for w in sample.workers
                )
                if alive:
                    runtime.missing.pop(node.node_id, None)
                else:
                    runtime.missing.setdefault(node.node_id, now)

    def _index(self) -> None:
        """Which jobs' generations have members on each node (samples are many, jobs few)."""
        index: dict[str, set[str]] = {}
        for rec in self.records.values():
            if rec.status.generation is not None:
                for m in rec.status.generation.members:
                    index.setdefault(m.node_id, set()).add(rec.name)
        self._on_node = index

    def _gone_workers(self, rec: JobRecord, now: float) -> list[TrainingFault]:
        """The generation's members whose samples have shown none of its workers for ``workers_missing_s``."""
        gen = rec.status.generation
        runtime = self.runtime.get(rec.name)
        missing = runtime.missing if runtime is not None else {}
        if gen is None or gen.stage != "running" or gen.started is None:
            return []
        out = []
        for node_id, since in missing.items():
            if gen.member(node_id) is not None and now - max(since, gen.started) >= self.cfg.workers_missing_s:
                silent = now - max(since, gen.started)
                why = f"no worker of generation {gen.number} in {node_id}'s samples for {silent:.0f} s"
                out.append(
                    TrainingFault(
                        job_id=rec.name, generation=gen.number, node_id=node_id, kind="worker_exit", rank=0, message=why
                    )
                )
        return out

    # ---- the leader's loop --------------------------------------------------------------------------------
    async def tick(self, now: float) -> None:
        if not self.ctx.leadership.is_leader:
            return
        for name in list(self.records):
            try:
                await self._step(name, now)
            except Exception as exc:  # one job's trouble (a broker error, not leading) must not stop the others
                log.warning("job step failed", job=name, error=repr(exc))

    async def _step(self, name: str, now: float) -> None:
        async with self._lock:
            rec = self.records.get(name)
            if rec is None:
                return
            gen_before = rec.status.generation.number if rec.status.generation else None
            runtime = self._runtime(rec.name)
            evidence = runtime.evidence
            if not evidence.faults:
                gone = self._gone_workers(rec, now)
                if gone:
                    evidence.faults, evidence.first_fault_at = gone, now - self.cfg.fault_settle_s
            verdict = None
            if rec.status.generation is not None and rec.status.generation.stage == "running" and not evidence.faults:
                verdict = self._policy(rec, now)
            acted = verdict is not None and rec.status.generation is not None
            if acted and rec.status.generation is not None:
                rec = await self.reconciler.resize(rec, rec.status.generation, now, verdict)
                acted = (rec.status.generation.number if rec.status.generation else None) != gen_before
            if not acted:  # no verdict, or none that could be placed: the usual step
                rec = await self.reconciler.step(rec, now, evidence)
            gen = rec.status.generation
            if (gen.number if gen is not None else None) != gen_before:
                runtime.next_generation(gen)
            if Reconciler.gone(rec):
                await self.ctx.store.delete(STATE_JOBS, rec.name, "job")
                self._forget(rec.name)
                log.info("job deleted", job=rec.name)

    def _policy(self, rec: JobRecord, now: float) -> Resize | None:
        """What the job's policies and the straggler check ask for, if anything."""
        gen = rec.status.generation
        runtime = self.runtime.get(rec.name)
        metrics = runtime.metrics if runtime is not None else None
        if gen is None or metrics is None:
            return None
        spec = rec.spec.job
        verdict = evaluate(
            spec.policies, metrics, now, rec.status.last_resize, gen.replicas, spec.min_replicas, spec.max_replicas
        )
        if verdict is not None:
            counts = sorted(replica_counts(spec))
            if verdict.action == "scaleOut":
                up = [c for c in counts if c > gen.replicas]
                return Resize("grow", up[0], verdict.reason, verdict.metrics) if up else None
            if verdict.action == "scaleIn":
                down = [c for c in counts if c < gen.replicas]
                return Resize("shrink", down[-1], verdict.reason, verdict.metrics) if down else None
            slow = straggler(metrics, now, verdict.policy.window_s, factor=self.cfg.straggler_factor)
            if slow is not None and slow.node_id is not None:  # replace: the slowest replica's node
                reason = f"{verdict.reason}; {slow.reason}"
                return Resize(
                    "replace", gen.replicas, reason, verdict.metrics | slow.metrics, frozenset({slow.node_id})
                )
            return None
        slow = straggler(metrics, now, self.cfg.straggler_window_s, factor=self.cfg.straggler_factor)
        if slow is not None and slow.node_id is not None:
            cooled = rec.status.last_resize is None or now - rec.status.last_resize >= self.cfg.grow_cooldown_s
            if cooled and len(gen.members) > 0:
                return Resize("replace", gen.replicas, slow.reason, slow.metrics, frozenset({slow.node_id}))
        return None

    async def on_lead(self, epoch: int) -> None:
        for runtime in self.runtime.values():
            runtime.evidence = Evidence()  # a new term judges faults it hears itself
        now = self.ctx.clock.now()
        adopted = 0
        for rec in list(self.records.values()):
            if rec.terminal or rec.status.generation is None:
                continue
            gen = rec.status.generation
            why = f"adopted in epoch {epoch} by {self.ctx.instance_id}: generation {gen.number} ({gen.stage})"
            why += " kept as it is"
            try:
                async with self._lock:
                    await self._save(decide(rec, "adopt", why, now))
            except Exception as exc:
                log.warning("adoption not recorded", job=rec.name, error=repr(exc))
            adopted += 1
        log.info("jobs resumed", epoch=epoch, jobs=len(self.records), adopted=adopted)

    # ---- API and status -----------------------------------------------------------------------------------
    def api(self) -> RouteSet:
        return RouteSet(
            routes.routes(self),
            self.openapi,
            health=lambda: {"jobs": len(self.records)},
            body_types=routes.BODY_TYPES,
        )

    def stats(self) -> dict[str, int]:
        return {"jobs": len(self.records), "generations_started": self.reconciler.generations_started}

    def metrics(self) -> dict[str, Any]:
        return series.series(self.records.values(), self.decisions)

    def dashboard(self) -> Dashboard:
        now = self.ctx.clock.now
        return Dashboard(
            panels=(
                Panel("jobs", "Jobs", lambda _: dashboard.board(self.records.values(), now())),
                Panel("job", "", lambda key: dashboard.one(self.records.get(key or ""), now()), keyed=True),
                Panel("allocations", "", lambda _: dashboard.allocations(self.records.values())),
            ),
            timeline=lambda: dashboard.moments(self.records.values()),
        )

    def status(self) -> dict[str, Any]:
        return {"jobs": [msgspec.to_builtins(job_answer(r)) for r in self.jobs()]}
