"""What the jobs component writes to ``myolo.state.jobs`` (keyed by job name): one ``JobRecord`` per job.

The record's ``spec`` is what the user asked for (the manifest as applied, a replica count, a delete
request); its ``status`` is what the controller observed and decided: the job's phase, its current generation
(nodes, ranks, GPUs, the rendezvous and the commands that start and stop it) and the decisions taken with the
metric values that caused them. It is written before any command goes out, so a new leader resumes each job
where the last one left it, without restarting workers that are healthy. Records are frozen: a change is a new
record (``with_status`` / ``with_spec``), kept in memory once written.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
import structlog

from myolo.coordinator.jobs.earlier import upgrade_job_record
from myolo.coordinator.jobs.manifest import ElasticJobSpec
from myolo.coordinator.state.flat import split_flat

Phase = Literal["Pending", "Running", "Resizing", "Succeeded", "Failed"]
TERMINAL_PHASES: frozenset[str] = frozenset({"Succeeded", "Failed"})
# the generation's own progress: stopping the previous one, starting this one, training, or ended
Stage = Literal["stopping", "starting", "running", "ended"]
DecisionKind = Literal[
    "start", "shrink", "grow", "scale", "replace", "restart", "pending", "fail", "succeed", "delete", "adopt"
]
MAX_DECISIONS = 50
log = structlog.get_logger("myolo.coordinator.jobs")


class Decision(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """One decision about a job, with why and the measurements behind it (newest last in the record)."""

    time: float
    kind: DecisionKind
    reason: str
    generation: int | None = None
    replicas: int | None = None
    metrics: dict[str, float] = {}
    by: str = "auto"  # "auto", or "operator:<name>" for scale/delete


class Member(msgspec.Struct, kw_only=True, frozen=True):
    """One node of a generation: its node rank and the GPUs its workers use (one worker per GPU)."""

    node_id: str
    node_rank: int
    gpus: list[int]
    start_command: str | None = None  # the start_workers command id once issued
    stop_command: str | None = None  # the stop_workers command id once issued (this generation's end)


class Generation(msgspec.Struct, kw_only=True, frozen=True):
    """One layout of the job: from its start to its stop, the same workers on the same nodes."""

    number: int
    replicas: int
    workers_per_node: int
    members: list[Member]
    master_addr: str
    master_port: int
    stage: Stage = "stopping"
    created: float
    started: float | None = None  # every start_workers command done
    first_step_at: float | None = None  # the first progress of this generation
    resumed_from: int | None = None  # the step before the first one this generation trained
    cause: str = ""  # the decision that made it

    @property
    def world_size(self) -> int:
        return self.workers_per_node * len(self.members)

    @property
    def node_ids(self) -> list[str]:
        return [m.node_id for m in self.members]

    def member(self, node_id: str) -> Member | None:
        return next((m for m in self.members if m.node_id == node_id), None)


class JobProgress(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """The job's latest numbers, from its workers' progress (kept in memory, written with the record)."""

    step: int = 0
    loss: float | None = None
    tokens_per_s: float | None = None
    step_time_s: float | None = None
    gradient_staleness: int | None = None
    updated: float | None = None
    # the job's own all-reduce bus bandwidth (GB/s), measured after the first step of generation allreduce_generation
    allreduce_busbw_gbps: float | None = None
    allreduce_generation: int | None = None


class JobSpec(msgspec.Struct, kw_only=True, frozen=True):
    """What the user asked for: the manifest as applied, a replica count and a delete request. Only the user's
    own requests change it (apply, ``myoloctl scale``, delete), and the job's own grow/shrink policies, which
    size it for the user as a Kubernetes autoscaler writes a deployment's ``spec.replicas``."""

    job: ElasticJobSpec
    manifest: str = ""  # the YAML as applied (for `myoloctl get job -o yaml`)
    desired_replicas: int | None = None  # None: as many as fit, up to maxReplicas
    deleting: bool = False


class JobStatus(msgspec.Struct, kw_only=True, frozen=True):
    """What the controller observed and decided: the phase, the generations, the budgets spent, the progress
    and the decisions with their reasons."""

    updated: float
    phase: Phase = "Pending"
    reason: str = ""
    generation: Generation | None = None
    generations: int = 0  # generations made so far (the next one is numbered generations + 1)
    previous: Generation | None = None  # the generation being stopped while ``generation`` waits to start
    restarts: int = 0  # restarts after worker failures (the budget is spec.job.max_restarts)
    streak: int = 0  # failed generations since one trained healthy_after_s (the back-off's exponent)
    node_failures: dict[str, int] = {}  # worker failures in a row of this job per node (a repeat offender is cordoned)
    avoid: dict[str, float] = {}  # nodes left out of placements until then (their agent refused or did not answer)
    last_resize: float | None = None  # for the policies' and growth's cooldowns
    not_before: float | None = None  # back-off: no new generation before this time
    progress: JobProgress = msgspec.field(default_factory=JobProgress)
    decisions: list[Decision] = []


class JobRecord(msgspec.Struct, kw_only=True, frozen=True):
    name: str
    created: float
    spec: JobSpec
    status: JobStatus

    @property
    def terminal(self) -> bool:
        return self.status.phase in TERMINAL_PHASES

    @classmethod
    def from_flat(cls, raw: bytes) -> JobRecord:
        """A job record in an earlier form: written before spec and status were apart (``spec`` then held the
        manifest's spec), or with the trainer job flat. The fields moved are logged, naming the record."""
        data = msgspec.json.decode(raw)
        moved = upgrade_job_record(data) if isinstance(data, dict) else []
        if moved:
            log.info("job record read from the flat trainer form", record=f"job/{data.get('name')}", moved=moved)
            raw = msgspec.json.encode(data)
        if isinstance(data, dict) and "status" in data and "spec" in data:
            return msgspec.json.decode(raw, type=cls)
        return split_flat(
            raw,
            cls,
            _OWN,
            {"spec": "job", "manifest": "manifest", "desired_replicas": "desired_replicas", "deleting": "deleting"},
        )


_OWN = frozenset({"name", "created"})


def with_status(rec: JobRecord, **changes: Any) -> JobRecord:
    """``rec`` with ``changes`` to its status (a new record; not written yet)."""
    return msgspec.structs.replace(rec, status=msgspec.structs.replace(rec.status, **changes))


def with_spec(rec: JobRecord, **changes: Any) -> JobRecord:
    """``rec`` with ``changes`` to its spec: the user's requests only (a new record; not written yet)."""
    return msgspec.structs.replace(rec, spec=msgspec.structs.replace(rec.spec, **changes))


STATE_JOBS = "myolo.state.jobs"  # the compacted topic they are written to
