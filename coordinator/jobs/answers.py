"""What the API answers for a job, and what ``myoloctl`` reads: the state record's spec and status side by
side in one flat object (``name``, ``spec``, ``phase``, ``generation``, ...), the shape openapi.yaml documents."""

from __future__ import annotations

import msgspec

from myolo.coordinator.jobs.manifest import ElasticJobSpec
from myolo.coordinator.jobs.nccl import NcclView
from myolo.coordinator.jobs.records import TERMINAL_PHASES, Decision, Generation, JobProgress, JobRecord, Phase


class JobAnswer(msgspec.Struct, kw_only=True, frozen=True):
    name: str
    spec: ElasticJobSpec
    manifest: str = ""  # the YAML as applied (for `myoloctl get job -o yaml`)
    created: float
    updated: float
    phase: Phase = "Pending"
    reason: str = ""
    desired_replicas: int | None = None  # set by `myoloctl scale`; None: as many as fit, up to maxReplicas
    generation: Generation | None = None
    generations: int = 0
    previous: Generation | None = None
    restarts: int = 0
    streak: int = 0
    node_failures: dict[str, int] = {}
    avoid: dict[str, float] = {}
    last_resize: float | None = None
    not_before: float | None = None
    progress: JobProgress = msgspec.field(default_factory=JobProgress)
    decisions: list[Decision] = []
    deleting: bool = False
    nccl: NcclView | None = None  # what NCCL chose for the running generation (GET /v1/jobs/{name} only)

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES


def job_answer(rec: JobRecord, nccl: NcclView | None = None) -> JobAnswer:
    """The record as the API answers it (a field added to the status and not here fails loudly)."""
    spec = rec.spec
    return JobAnswer(
        nccl=nccl,
        name=rec.name,
        created=rec.created,
        spec=spec.job,
        manifest=spec.manifest,
        desired_replicas=spec.desired_replicas,
        deleting=spec.deleting,
        **msgspec.structs.asdict(rec.status),
    )


class JobList(msgspec.Struct, kw_only=True):
    """``GET /v1/jobs``: every job, by name."""

    items: list[JobAnswer]
