"""The leader's control loop for one job: look at its record and the fleet, take the next step.

Level-triggered, like a Kubernetes controller: each tick compares what the record says with what the fleet
and the agents' answers show, and moves the job one step. Every step writes the record before it sends a
command, so a new leader that reads the record mid-way continues from it (the commands component resends
what was not acknowledged, with the same ids).

A generation goes ``stopping`` (the previous one is told to stop; the agents answer once its workers are
gone) -> ``starting`` (``start_workers`` to each member; each agent answers once they run) -> ``running``
(until a fault, a resize or the end) -> ``ended``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog
from msgspec.structs import replace

from myolo.common.clock import Clock
from myolo.coordinator.commands.interface import CommandSender
from myolo.coordinator.cordons.interface import AutoCordons
from myolo.coordinator.fleet.interface import FleetNodes, NodeState
from myolo.coordinator.jobs.config import JobsConfig
from myolo.coordinator.jobs.generations import held_gpus, master_port, new_generation, start_args, stop_args
from myolo.coordinator.jobs.placement import Capacity, Placement, capacity, place
from myolo.coordinator.jobs.records import (
    MAX_DECISIONS,
    Decision,
    DecisionKind,
    Generation,
    JobRecord,
    with_spec,
    with_status,
)
from myolo.events.payloads import TrainingCompleted, TrainingFault

log = structlog.get_logger("myolo.coordinator.jobs")
AUTO_JOB = "auto:job"


@dataclass
class Evidence:
    """What the job's workers reported about its current generation (leader's memory, until the generation
    changes): worker faults, in arrival order, and each node's completion."""

    faults: list[TrainingFault] = field(default_factory=list)
    completed: dict[str, TrainingCompleted] = field(default_factory=dict)
    first_fault_at: float | None = None  # when the first fault arrived (coordinator clock)


@dataclass
class Resize:
    """A resize the policies ask for: the replica count wanted and why."""

    kind: DecisionKind
    replicas: int
    reason: str
    metrics: dict[str, float]
    avoid: frozenset[str] = frozenset()  # nodes to leave out (a straggler's)


def why_unschedulable(node: NodeState | None) -> str | None:
    if node is None:
        return "is no longer in the fleet"
    if node.cordoned and node.cordon is not None:
        return f"was cordoned ({node.cordon.by}: {node.cordon.reason})"
    if node.liveness != "Ready":
        return f"is {node.liveness}"
    if node.health == "fail":
        return f"has FAIL health ({'; '.join(node.health_reasons) or 'no reason given'})"
    return None


def decide(rec: JobRecord, kind: DecisionKind, reason: str, now: float, **extra) -> JobRecord:
    """``rec`` with one more decision (the newest ``MAX_DECISIONS`` kept); not written yet."""
    gen = rec.status.generation
    decision = Decision(
        time=now,
        kind=kind,
        reason=reason,
        generation=extra.pop("generation", gen.number if gen else None),
        replicas=extra.pop("replicas", gen.replicas if gen else None),
        **extra,
    )
    return with_status(rec, decisions=[*rec.status.decisions, decision][-MAX_DECISIONS:])


class Reconciler:
    """The steps. Records are frozen: a step builds the next record and hands it to ``save``, which writes it
    to the state topic (acknowledged), keeps it in memory and returns it; each step returns the job's newest
    record (written, or not yet when nothing needed writing)."""

    def __init__(
        self,
        cfg: JobsConfig,
        fleet: FleetNodes,
        commands: CommandSender,
        cordons: AutoCordons,
        save: Callable[[JobRecord], Awaitable[JobRecord]],
        records: Callable[[], list[JobRecord]],
        clock: Clock,
    ) -> None:
        self.cfg = cfg
        self.clock = clock
        self.fleet = fleet
        self.commands = commands
        self.cordons = cordons
        self.save = save
        self.records = records
        self.generations_started = 0

    # ---- capacity -------------------------------------------------------------------------------------------
    def free(self, rec: JobRecord, avoid: frozenset[str] = frozenset()) -> list[Capacity]:
        """Free GPUs for this job: schedulable nodes, healthy GPUs, not held by another job (its own count)."""
        nodes = [n for n in self.fleet.nodes() if n.node_id not in avoid]
        return capacity(nodes, held_gpus(self.records(), but=rec.name))

    def place(self, rec: JobRecord, want: int | None = None, avoid: frozenset[str] = frozenset()) -> Placement | None:
        now = self.clock.now()
        avoid = avoid | {n for n, until in rec.status.avoid.items() if until > now}
        return place(rec.spec.job, self.free(rec, avoid), want if want is not None else self.target(rec))

    @staticmethod
    def target(rec: JobRecord) -> int:
        """The replicas wanted: the operator's (or a policy's) choice; else as many as fit up to maxReplicas, or
        minReplicas for a job with a scaleOut policy (it grows when its metric says so)."""
        if rec.spec.desired_replicas is not None:
            return rec.spec.desired_replicas
        if any(p.action == "scaleOut" for p in rec.spec.job.policies):
            return rec.spec.job.min_replicas
        return rec.spec.job.max_replicas

    def address(self, node_id: str) -> str:
        node = self.fleet.node(node_id)
        return (node.address if node is not None else None) or self.cfg.default_address

    def pending_reason(self, rec: JobRecord) -> str:
        spec = rec.spec.job
        free = self.free(rec)
        gpus = sum(len(c.free_gpus) for c in free)
        return (
            f"waiting for capacity: minReplicas {spec.min_replicas} x {spec.gpus_per_replica} GPU(s) per replica "
            f"(tp {spec.tp} within a node); {gpus} free GPU(s) on {len(free)} schedulable node(s)"
        )

    # ---- the step -------------------------------------------------------------------------------------------
    async def step(self, rec: JobRecord, now: float, evidence: Evidence) -> JobRecord:
        if rec.terminal:
            return rec
        gen = rec.status.generation
        if rec.spec.deleting:
            return await self._deleting(rec, now)
        if gen is None:
            return await self._pending(rec, now)
        if gen.stage == "stopping":
            return await self._stopping(rec, gen, now)
        if gen.stage == "starting":
            return await self._starting(rec, gen, now, evidence)
        if gen.stage == "running":
            return await self._running(rec, gen, now, evidence)
        return rec

    async def _pending(self, rec: JobRecord, now: float) -> JobRecord:
        stopping = rec.status.previous is not None
        if stopping:
            stopped, rec = await self._previous_stopped(rec, now)
            if not stopped:
                return rec
        if rec.status.not_before is not None and now < rec.status.not_before:
            return rec
        placement = self.place(rec)
        if placement is None:
            reason = self.pending_reason(rec)
            if rec.status.phase != "Pending" or rec.status.reason != reason or stopping:
                if rec.status.phase != "Pending":
                    rec = decide(rec, "pending", reason, now)
                rec = await self.save(with_status(rec, phase="Pending", reason=reason, previous=None))
            return rec
        first = rec.status.generations == 0
        kind: DecisionKind = "start" if first else "restart"
        reason = (
            f"{placement.replicas} replica(s) on {len(placement.nodes)} node(s)"
            if first
            else f"capacity for {placement.replicas} replica(s) is back"
        )
        return await self.begin(rec, placement, kind, reason, now)

    async def begin(
        self,
        rec: JobRecord,
        placement: Placement | None,
        kind: DecisionKind,
        reason: str,
        now: float,
        *,
        checkpoint: bool = True,
        metrics: dict[str, float] | None = None,
        by: str = "auto",
    ) -> JobRecord:
        """End the current generation (if it started) and make the next one from ``placement`` (None: the job
        waits in Pending). The record is written before any stop goes out."""
        old = rec.status.generation
        if old is not None and old.stage in ("starting", "running"):
            rec = with_status(rec, previous=replace(old, stage="ended"))
        number = rec.status.generations + 1
        if placement is not None:
            addr = self.address(placement.nodes[0][0])
            port = master_port(rec.name, number, self.cfg.port_min, self.cfg.port_max)
            gen = new_generation(number, placement, addr, port, f"{kind}: {reason}", now)
            rec = with_status(rec, generation=gen, generations=number, phase="Resizing", reason=reason)
        else:
            rec = with_status(rec, generation=None, phase="Pending", reason=reason)
        if kind in ("shrink", "grow", "scale", "replace", "restart"):
            rec = with_status(rec, last_resize=now)
        rec = decide(rec, kind, reason, now, metrics=metrics or {}, by=by)
        log.info(
            "job decision",
            job=rec.name,
            kind=kind,
            reason=reason,
            generation=rec.status.generation.number if rec.status.generation else None,
            replicas=rec.status.generation.replicas if rec.status.generation else None,
        )
        rec = await self.save(rec)
        if rec.status.previous is not None:
            rec = await self._send_stops(rec, rec.status.previous, checkpoint)
        return rec

    async def _send_stops(self, rec: JobRecord, prev: Generation, checkpoint: bool) -> JobRecord:
        sent = False
        members = []
        for m in prev.members:
            node = self.fleet.node(m.node_id)
            if m.stop_command is not None or node is None or node.liveness == "Lost":
                members.append(m)
                continue  # a Lost node cannot answer: its workers are fenced by the generation number
            intent = await self.commands.issue(m.node_id, stop_args(rec, prev, checkpoint))
            members.append(replace(m, stop_command=intent.command_id))
            sent = True
        if sent:
            rec = await self.save(with_status(rec, previous=replace(prev, members=members)))
        return rec

    async def _previous_stopped(self, rec: JobRecord, now: float) -> tuple[bool, JobRecord]:
        """Whether the previous generation's workers are gone (or were waited for long enough), with the record
        that says so (``previous`` cleared, not written yet)."""
        if rec.status.previous is None:
            return True, rec
        told = await self._send_stops(
            rec, rec.status.previous, checkpoint=False
        )  # after a failover: members not told yet
        prev, rec = told.status.previous or rec.status.previous, told
        waiting = []
        for m in prev.members:
            node = self.fleet.node(m.node_id)
            if node is None or node.liveness != "Ready" or m.stop_command is None:
                continue  # a silent node is not waited for: the next generation leaves it out
            intent = self.commands.intent(m.stop_command)
            if intent is not None and not intent.terminal:
                waiting.append(m.node_id)
        created = rec.status.generation.created if rec.status.generation else (rec.status.last_resize or now)
        if waiting and now - created < self.cfg.stop_timeout_s:
            return False, rec
        if waiting:
            log.warning("stop not confirmed in time: going on", job=rec.name, nodes=waiting)
        return True, with_status(rec, previous=None)

    async def _stopping(self, rec: JobRecord, gen: Generation, now: float) -> JobRecord:
        stopped, rec = await self._previous_stopped(rec, now)
        if not stopped:
            return rec
        if rec.status.not_before is not None and now < rec.status.not_before:
            return rec
        lost = self._unschedulable(gen)
        if lost:  # a member went away before its generation started: place again
            placement = self.place(rec)
            node, why = lost[0]
            reason = f"{node} {why} before generation {gen.number} started"
            return await self.begin(rec, placement, "shrink", reason, now)
        starting = replace(gen, stage="starting")
        rec = await self.save(with_status(rec, generation=starting))
        return await self._send_starts(rec, starting)

    async def _send_starts(self, rec: JobRecord, gen: Generation) -> JobRecord:
        sent = False
        members = []
        for m in gen.members:
            if m.start_command is None:
                intent = await self.commands.issue(m.node_id, start_args(rec, gen, m))
                m, sent = replace(m, start_command=intent.command_id), True
            members.append(m)
        if sent:
            self.generations_started += 1
            rec = await self.save(with_status(rec, generation=replace(gen, members=members)))
        return rec

    async def _starting(self, rec: JobRecord, gen: Generation, now: float, evidence: Evidence) -> JobRecord:
        unanswered = {
            m.node_id
            for m in gen.members
            if (i := self.commands.intent(m.start_command or "")) is None or i.status == "pending"
        }
        # a Suspect node that has not even taken its start is as good as gone: the others would wait for it
        lost = self._unschedulable(gen, faults=bool(evidence.faults), suspect=unanswered)
        if lost:
            node, why = lost[0]
            return await self.begin(rec, self.place(rec), "shrink", f"{node} {why}", now, checkpoint=False)
        rec = await self._send_starts(rec, gen)  # after a failover: members not told yet
        gen = rec.status.generation or gen
        answers = {m.node_id: self.commands.intent(m.start_command or "") for m in gen.members}
        refused = [(n, i) for n, i in answers.items() if i is not None and i.outcome == "failed"]
        if refused:
            node, intent = refused[0]
            why = f"start_workers {intent.status} on {node}: {intent.reason or 'no reason given'}"
            if "failed" in (intent.status, intent.original):  # the workers could not run there: the job's failure
                return await self._failed(rec, gen, node, why, now)
            # the node refused (draining, GPUs taken) or did not answer: its state, not the job's failure;
            # place without it for a while, without spending the restart budget
            rec = self._avoid(rec, [node], now)
            return await self.begin(
                rec,
                self.place(rec),
                "restart",
                f"{why}; placed without it for {self.cfg.avoid_s:g} s",
                now,
                checkpoint=False,
            )
        if evidence.faults:
            return await self._on_faults(rec, gen, evidence, now)
        if all(i is not None and i.outcome == "done" for i in answers.values()):
            running = replace(gen, stage="running", started=now)
            reason = f"generation {gen.number}: {gen.replicas} replica(s)"
            return await self.save(with_status(rec, generation=running, phase="Running", reason=reason))
        if now - gen.created > self.cfg.start_timeout_s:
            silent = sorted(n for n, i in answers.items() if i is None or i.outcome != "done")
            rec = self._avoid(rec, silent, now)
            why = f"no start confirmed by {', '.join(silent)} in {self.cfg.start_timeout_s:g} s"
            return await self.begin(rec, self.place(rec), "restart", why, now, checkpoint=False)
        return rec

    def _avoid(self, rec: JobRecord, nodes: list[str], now: float) -> JobRecord:
        """Leave ``nodes`` out of this job's placements for ``avoid_s`` (expired entries are dropped)."""
        avoid = {n: t for n, t in rec.status.avoid.items() if t > now} | dict.fromkeys(nodes, now + self.cfg.avoid_s)
        return with_status(rec, avoid=avoid)

    async def _running(self, rec: JobRecord, gen: Generation, now: float, evidence: Evidence) -> JobRecord:
        lost = self._unschedulable(gen, faults=bool(evidence.faults))
        if lost:
            node, why = lost[0]
            alive = all((n := self.fleet.node(m.node_id)) is not None and n.liveness == "Ready" for m in gen.members)
            return await self.begin(rec, self.place(rec), "shrink", f"{node} {why}", now, checkpoint=alive)
        if evidence.faults:
            return await self._on_faults(rec, gen, evidence, now)
        if evidence.completed and set(evidence.completed) >= set(gen.node_ids):
            return await self._completed(rec, gen, evidence, now)
        rec = await self._healthy(rec, gen, now)
        return await self.resize(rec, gen, now)

    async def _healthy(self, rec: JobRecord, gen: Generation, now: float) -> JobRecord:
        """A generation that trained ``healthy_after_s`` from its first step ends its nodes' rows of failures
        and the back-off: a job that failed now and then over days restarts at once, as on its first failure."""
        if gen.first_step_at is None or now - gen.first_step_at < self.cfg.healthy_after_s:
            return rec
        failures = {n: c for n, c in rec.status.node_failures.items() if n not in gen.node_ids}
        if rec.status.streak == 0 and failures == rec.status.node_failures:
            return rec
        log.info("job healthy again", job=rec.name, generation=gen.number, streak=rec.status.streak)
        return await self.save(with_status(rec, streak=0, node_failures=failures))

    async def resize(self, rec: JobRecord, gen: Generation, now: float, verdict: Resize | None = None) -> JobRecord:
        target = self.target(rec)
        if gen.replicas > target:
            placement = self.place(rec, want=target)
            if placement is not None and placement.replicas < gen.replicas:
                return await self.begin(rec, placement, "scale", f"scaled to {target} replica(s)", now)
            return rec
        if verdict is not None:
            placement = self.place(rec, want=verdict.replicas, avoid=verdict.avoid)
            if placement is not None and (placement.replicas != gen.replicas or verdict.avoid):
                if verdict.kind in ("grow", "shrink"):  # the policy's size holds until the next verdict
                    rec = with_spec(rec, desired_replicas=placement.replicas)
                return await self.begin(rec, placement, verdict.kind, verdict.reason, now, metrics=verdict.metrics)
            return rec
        cooled = rec.status.last_resize is None or now - rec.status.last_resize >= self.cfg.grow_cooldown_s
        if gen.replicas < target and cooled:
            placement = self.place(rec, want=target)
            if placement is not None and placement.replicas > gen.replicas:
                reason = f"capacity for {placement.replicas} replica(s) (was {gen.replicas}, target {target})"
                kind: DecisionKind = "grow" if rec.spec.desired_replicas is None else "scale"
                return await self.begin(rec, placement, kind, reason, now)
        return rec

    def silent_members(self, gen: Generation, evidence: Evidence, now: float) -> list[str] | None:
        """The members that gave no sign of life since the first fault (no fault of theirs, no sample), once
        each member gave one or ``fault_settle_s`` passed; None while waiting. A machine that died takes its
        workers with it and stops sampling: the survivors' workers fail at once on its closed sockets, so
        the one member that stays silent is the cause, found seconds before it would be Suspect."""
        since = evidence.first_fault_at if evidence.first_fault_at is not None else now
        spoke = {f.node_id for f in evidence.faults}
        silent = []
        for m in gen.members:
            node = self.fleet.node(m.node_id)
            if m.node_id not in spoke and (node is None or node.last_seen is None or node.last_seen < since):
                silent.append(m.node_id)
        if silent and now - since < self.cfg.fault_settle_s:
            return None
        return silent

    async def _on_faults(self, rec: JobRecord, gen: Generation, evidence: Evidence, now: float) -> JobRecord:
        silent = self.silent_members(gen, evidence, now)
        if silent is None:
            return rec  # a member may still speak up: decide once it did, or the settle time passed
        if silent:
            quiet = now - (evidence.first_fault_at or now)
            reason = f"{', '.join(silent)} silent since the first worker fault ({quiet:.1f} s: no sample, no fault)"
            placement = self.place(rec, avoid=frozenset(silent))
            return await self.begin(rec, placement, "shrink", reason, now, checkpoint=False)
        first = evidence.faults[0]  # in arrival order: the first one is nearest the cause
        what = f"rank {first.rank} on {first.node_id}: {first.kind}"
        if first.signal or first.exit_code is not None:
            what += f" ({first.signal or f'exit code {first.exit_code}'})"
        elif first.message:
            what = f"{first.node_id}: {first.message}"
        return await self._failed(rec, gen, first.node_id, what, now)

    async def _failed(self, rec: JobRecord, gen: Generation, node_id: str | None, why: str, now: float) -> JobRecord:
        """A generation failed on a node that stays schedulable: restart (the same layout when it still fits),
        within the restart budget, after a back-off; cordon a node that fails this job again and again."""
        failures, count = dict(rec.status.node_failures), 0
        if node_id is not None:
            count = failures[node_id] = failures.get(node_id, 0) + 1
        rec = with_status(rec, restarts=rec.status.restarts + 1, streak=rec.status.streak + 1, node_failures=failures)
        if rec.status.restarts > rec.spec.job.max_restarts:
            reason = f"{why}; restart budget spent ({rec.spec.job.max_restarts} restart(s))"
            rec = await self.begin(rec, None, "fail", reason, now, checkpoint=False)
            return await self.save(with_status(rec, phase="Failed", reason=reason))
        avoid: frozenset[str] = frozenset()
        if node_id is not None and self.cfg.cordon_after_failures and count >= self.cfg.cordon_after_failures:
            reason = f"job {rec.name}: {count} failures on this node (last: {why})"
            self.cordons.cordon_automatically(node_id, reason, AUTO_JOB)
            avoid = frozenset({node_id})
        backoff = min(self.cfg.max_backoff_s, self.cfg.restart_backoff_s * 2 ** (rec.status.streak - 1))
        rec = with_status(rec, not_before=now + backoff)
        placement = self._same(gen) if not avoid else None
        placement = placement or self.place(rec, avoid=avoid)
        reason = f"{why}; restart {rec.status.restarts}/{rec.spec.job.max_restarts} after {backoff:g} s"
        return await self.begin(rec, placement, "restart", reason, now, checkpoint=False)

    def _same(self, gen: Generation) -> Placement | None:
        """The generation's own layout, when all its nodes and GPUs are still usable (a restart then finds its
        host-memory snapshots where they were written)."""
        nodes_now = [n for m in gen.members if (n := self.fleet.node(m.node_id)) is not None]
        usable = {c.node_id: set(c.free_gpus) for c in capacity(nodes_now, {})}  # one rule for a usable GPU
        if not all(set(m.gpus) <= usable.get(m.node_id, set()) for m in gen.members):
            return None
        nodes = tuple((m.node_id, tuple(m.gpus)) for m in gen.members)
        return Placement(replicas=gen.replicas, workers_per_node=gen.workers_per_node, nodes=nodes)

    async def _completed(self, rec: JobRecord, gen: Generation, evidence: Evidence, now: float) -> JobRecord:
        """Every worker exited 0: a training job succeeded if it reached its last step (else it stopped early
        and restarts); a job of another task (quantize: no steps) succeeded by finishing."""
        trainer = rec.spec.job.trainer
        ended = replace(gen, stage="ended")
        if trainer.runtime.task != "train":
            rec = with_status(rec, generation=ended, phase="Succeeded", reason=f"task {trainer.runtime.task} done")
            rec = decide(
                rec, "succeed", f"every worker of generation {gen.number} finished its {trainer.runtime.task}", now
            )
            return await self.save(rec)
        steps = trainer.optimizer.steps
        last = max((c.last_step or 0) for c in evidence.completed.values())
        if last < steps:
            return await self._failed(rec, gen, None, f"the workers stopped at step {last} of {steps}", now)
        rec = with_status(rec, generation=ended, phase="Succeeded", reason=f"trained {steps} steps")
        rec = decide(rec, "succeed", f"every worker of generation {gen.number} finished step {steps}", now)
        return await self.save(rec)

    async def _deleting(self, rec: JobRecord, now: float) -> JobRecord:
        """Stop the generation (with a checkpoint); the component forgets the job once nothing runs."""
        if rec.status.generation is not None:
            rec = await self.begin(rec, None, "delete", "deleted: stopping its workers", now, checkpoint=True)
        _, rec = await self._previous_stopped(rec, now)
        return rec

    @staticmethod
    def gone(rec: JobRecord) -> bool:
        """A deleted job whose workers are all stopped: its record can be removed."""
        return rec.spec.deleting and rec.status.generation is None and rec.status.previous is None

    def _unschedulable(
        self, gen: Generation, faults: bool = False, suspect: set[str] | None = None
    ) -> list[tuple[str, str]]:
        """Members the generation cannot keep. A Suspect node (a few samples missed) counts only together with
        a fault of the generation, or when it is in ``suspect`` (it did not take its start): alone it may be a
        blip of the bus, and its workers may train on."""
        out = []
        for m in gen.members:
            node = self.fleet.node(m.node_id)
            why = why_unschedulable(node)
            suspect_only = node is not None and node.liveness == "Suspect" and why == "is Suspect"
            if why is not None and (faults or not suspect_only or m.node_id in (suspect or ())):
                out.append((m.node_id, why))
        return out
