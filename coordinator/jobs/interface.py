"""What the HTTP routes (and other components) may ask of the jobs component."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from myolo.coordinator.core.errors import Conflict, NotFound
from myolo.coordinator.jobs.manifest import ManifestError, load_yaml, parse_manifest
from myolo.coordinator.jobs.nccl import NcclView
from myolo.coordinator.jobs.profile import ProfileRequest, ProfileStarted
from myolo.coordinator.jobs.records import JobRecord

__all__ = [
    "JobConflict",
    "JobRecord",
    "JobsAPI",
    "ManifestError",
    "UnknownJob",
    "load_yaml",
    "parse_manifest",
]


@runtime_checkable
class JobsAPI(Protocol):
    def jobs(self) -> tuple[JobRecord, ...]:
        """Every job known (deleted ones are gone), by name."""

    def job(self, name: str) -> JobRecord | None: ...

    def applying(self, name: str) -> bool:
        """True while an ``apply`` of ``name`` is under way: its record is being written and not yet in memory,
        so whoever follows the job must not read its absence as a deletion."""

    async def apply(self, manifest: str, by: str) -> tuple[JobRecord, bool]:
        """Create the job, or update its spec (replica bounds, policies) when it exists; (record, created).
        Raises ``ManifestError`` (field, reason) for a bad manifest, ``NotLeader`` on a standby, and
        ``JobConflict`` when the change cannot apply to a running job (e.g. a different model)."""

    async def scale(self, name: str, replicas: int, by: str) -> JobRecord:
        """Pin the job at ``replicas`` (within its bounds): ``UnknownJob``, ``ValueError`` naming the bound."""

    async def delete(self, name: str, by: str) -> JobRecord:
        """Stop the job's workers (with a checkpoint) and forget it once they stopped."""

    def nccl(self, name: str) -> NcclView | None:
        """What NCCL chose for the job's running generation (``jobs/nccl.py``); None without one."""

    async def profile(self, name: str, req: ProfileRequest, by: str) -> ProfileStarted:
        """Have the agent of the node that runs ``req.rank`` profile that worker (``jobs/profile.py``)."""


class UnknownJob(NotFound):
    def __init__(self, name: str) -> None:
        super().__init__(f"job {name!r} is not known", field="name", hint="list the jobs with GET /v1/jobs")
        self.name = name


class JobConflict(Conflict):
    """A change a running job cannot take (``field`` keeps its value while the job runs)."""

    def __init__(self, field: str, reason: str) -> None:
        hint = "a running job keeps this field; delete the job and apply it again to change it"
        super().__init__(f"{field}: {reason}", field=field, hint=hint)
        self.reason = reason
