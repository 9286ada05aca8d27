"""An in-memory jobs component for API and CLI tests: the ``JobsAPI`` the routes call, without Kafka.

It behaves towards the API as the real component does: writes only while leading (``NotLeader`` with the
leader's URL otherwise), the real manifest parser (``ManifestError`` naming the field), ``JobConflict`` for a
change a running job cannot take, ``UnknownJob``, and ``ValueError`` naming the bound for a scale outside it.
``running_job`` builds a job in its second generation, with progress and decisions, for the renderers.
"""

from __future__ import annotations

from aiohttp import web

from myolo.common.clock import SimClock
from myolo.coordinator.api.app import create_app
from myolo.coordinator.core.component import RouteSet
from myolo.coordinator.core.errors import NotLeader
from myolo.coordinator.fleet.model import NodeState
from myolo.coordinator.jobs import routes as job_routes
from myolo.coordinator.jobs.interface import JobConflict, UnknownJob
from myolo.coordinator.jobs.manifest import parse_manifest
from myolo.coordinator.jobs.nccl import NcclView, nccl_view
from myolo.coordinator.jobs.queries import JobQueries
from myolo.coordinator.jobs.records import (
    Decision,
    Generation,
    JobProgress,
    JobRecord,
    JobSpec,
    JobStatus,
    Member,
    with_spec,
    with_status,
)
from tests.support.api_auth import MemoryAudit, security
from tests.support.coordinator.api_fleet import MemoryFleet
from tests.unit.coordinator.jobs.test_manifest import EXAMPLE as MANIFEST  # the tiny-pretrain example


class MemoryJobs(JobQueries):
    def __init__(self, *, leader: bool = True, leader_url: str | None = None, clock: SimClock | None = None) -> None:
        self.clock = clock or SimClock()
        self.is_leader = leader
        self.leader_url = leader_url
        self.records: dict[str, JobRecord] = {}
        self.writes: list[tuple[str, str, str]] = []  # (verb, job, by)
        self.nodes: dict[str, NodeState] = {}  # the fleet, for what NCCL chose

    def jobs(self) -> tuple[JobRecord, ...]:
        return tuple(sorted(self.records.values(), key=lambda r: r.name))

    def job(self, name: str) -> JobRecord | None:
        return self.records.get(name)

    def applying(self, name: str) -> bool:
        return False  # apply here writes nothing that could be under way

    def nccl(self, name: str) -> NcclView | None:
        """What the fleet in ``nodes`` (node id -> NodeState) says of the job's generation."""
        rec = self.records.get(name)
        return nccl_view(rec, self.nodes.get) if rec is not None else None

    def add(self, record: JobRecord) -> JobRecord:
        self.records[record.name] = record
        return record

    async def apply(self, manifest: str, by: str) -> tuple[JobRecord, bool]:
        self._lead()
        spec = parse_manifest(manifest)
        now = self.clock.now()
        old = self.records.get(spec.name)
        self.writes.append(("apply", spec.name, by))
        if old is None:
            record = JobRecord(
                name=spec.name,
                created=now,
                spec=JobSpec(job=spec, manifest=manifest),
                status=JobStatus(updated=now),
            )
            return self.add(record), True
        if old.spec.job.trainer.model != spec.trainer.model:
            raise JobConflict("spec.trainer.model", f"the job trains {old.spec.job.trainer.model!r}; it cannot change")
        return self.add(with_status(with_spec(old, job=spec, manifest=manifest), updated=now)), False

    async def scale(self, name: str, replicas: int, by: str) -> JobRecord:
        self._lead()
        record = self._get(name)
        low, high = record.spec.job.min_replicas, record.spec.job.max_replicas
        if not low <= replicas <= high:
            raise ValueError(f"{replicas} is outside the job's bounds: minReplicas {low}, maxReplicas {high}")
        self.writes.append(("scale", name, by))
        decision = Decision(
            time=self.clock.now(), kind="scale", reason=f"scaled to {replicas}", replicas=replicas, by=by
        )
        record = with_spec(record, desired_replicas=replicas)
        return self.add(with_status(record, decisions=[*record.status.decisions, decision]))

    async def delete(self, name: str, by: str) -> JobRecord:
        self._lead()
        record = self._get(name)
        self.writes.append(("delete", name, by))
        return self.add(with_spec(record, deleting=True))

    def _lead(self) -> None:
        if not self.is_leader:
            raise NotLeader(self.leader_url, "coord-leader" if self.leader_url else None)

    def _get(self, name: str) -> JobRecord:
        record = self.records.get(name)
        if record is None:
            raise UnknownJob(name)
        return record


def running_job(now: float, name: str = "tiny-pretrain", manifest: str = MANIFEST) -> JobRecord:
    """A job that shrank from 3 replicas to 2 (node-b failed) and trains again from step 120."""
    spec = parse_manifest(manifest.replace("tiny-pretrain", name))
    generation = Generation(
        number=2,
        replicas=2,
        workers_per_node=1,
        members=[
            Member(node_id="node-a", node_rank=0, gpus=[0], start_command="cmd-a2"),
            Member(node_id="node-c", node_rank=1, gpus=[1], start_command="cmd-c2"),
        ],
        master_addr="10.0.0.1",
        master_port=29411,
        stage="running",
        created=now - 30,
        started=now - 28,
        first_step_at=now - 25,
        resumed_from=120,
        cause="shrink",
    )
    decisions = [
        Decision(time=now - 300, kind="start", reason="placed 3 replicas on 3 nodes", generation=1, replicas=3),
        Decision(
            time=now - 30,
            kind="shrink",
            reason="node-b cordoned: XID 79 on GPU 0",
            generation=2,
            replicas=2,
            metrics={"gpu_util": 81.5},
        ),
    ]
    return JobRecord(
        name=name,
        created=now - 300,
        spec=JobSpec(job=spec, manifest=manifest),
        status=JobStatus(
            updated=now - 1,
            phase="Running",
            reason="training on 2 of 3 replicas (node-b cordoned)",
            generation=generation,
            restarts=1,
            node_failures={"node-b": 1},
            last_resize=now - 30,
            progress=JobProgress(step=150, loss=2.3456, tokens_per_s=12345.6, step_time_s=0.125, updated=now - 1),
            decisions=decisions,
        ),
    )


def parts_for(jobs: MemoryJobs) -> list[RouteSet]:
    return [RouteSet(job_routes.routes(jobs), job_routes.OPENAPI, body_types=job_routes.BODY_TYPES)]


def app_for(
    jobs: MemoryJobs,
    core: MemoryFleet | None = None,
    extra: list[RouteSet] | None = None,
    audit: MemoryAudit | None = None,
) -> web.Application:
    """The coordinator's API with the jobs' real routes over ``jobs`` (the core's routes from a MemoryFleet)."""
    core = core or MemoryFleet()
    return create_app(core, parts_for(jobs) + (extra or []), security(audit, core.clock, core.instance_id))
