"""What the jobs component's own HTTP routes ask of it: the job records themselves, and the operator's writes.
Other components ask the narrower ``JobsAPI`` (``interface.py``), which answers in Structs of its own."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from myolo.coordinator.jobs.interface import JobsAPI
from myolo.coordinator.jobs.records import JobRecord


@runtime_checkable
class JobsRoutes(JobsAPI, Protocol):
    def jobs(self) -> tuple[JobRecord, ...]:
        """Every job known (deleted ones are gone), by name."""

    def job(self, name: str) -> JobRecord | None: ...

    async def apply(self, manifest: str, by: str) -> tuple[JobRecord, bool]:
        """Create the job, or update its spec (replica bounds, policies) when it exists; (record, created).
        Raises ``ManifestError`` (field, reason) for a bad manifest, ``NotLeader`` on a standby, and
        ``JobConflict`` when the change cannot apply to a running job (e.g. a different model)."""

    async def scale(self, name: str, replicas: int, by: str) -> JobRecord:
        """Pin the job at ``replicas`` (within its bounds): ``UnknownJob``, ``ValueError`` naming the bound."""

    async def delete(self, name: str, by: str) -> JobRecord:
        """Stop the job's workers (with a checkpoint) and forget it once they stopped."""
