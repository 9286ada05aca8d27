"""What other components may ask of the jobs component: which nodes train, how a job trains, what it reads,
how it ended, and a job submitted from a manifest. The HTTP routes take the wider ``JobsRoutes`` (``api.py``)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Protocol, runtime_checkable

import msgspec

from myolo.coordinator.core.errors import Conflict, NotFound
from myolo.coordinator.jobs import manifest as _manifest
from myolo.coordinator.jobs.earlier import upgrade_manifest
from myolo.coordinator.jobs.manifest import ManifestError
from myolo.coordinator.jobs.nccl import NcclView
from myolo.coordinator.jobs.profile import ProfileRequest, ProfileStarted

__all__ = [
    "JobConflict",
    "JobData",
    "JobOutcome",
    "JobsAPI",
    "ManifestError",
    "Training",
    "UnknownJob",
    "check_manifest",
    "manifest_document",
    "upgrade_manifest",
]


class Training(msgspec.Struct, kw_only=True, frozen=True):
    """How a live job trains now: its generation's nodes, whether it runs, and its latest per-replica rate."""

    job: str
    nodes: tuple[str, ...]  # the current generation's nodes, one per member (none before it is placed)
    running: bool  # it has a generation, past its rendezvous and training
    first_step_at: float | None  # the generation's first progress
    tokens_per_s: float | None  # the latest per-replica tokens/s
    reported: float | None  # when that rate was reported


class JobData(msgspec.Struct, kw_only=True, frozen=True):
    """What a live job trains on (``data_path`` None: synthetic data; ``data_sha256`` None: no digest)."""

    job: str
    data_path: str | None
    data_sha256: str | None


class JobOutcome(msgspec.Struct, kw_only=True, frozen=True):
    """Where a job stands: its phase, why, and when that was last updated."""

    job: str
    phase: str
    reason: str
    updated: float

    @property
    def succeeded(self) -> bool:
        return self.phase == "Succeeded"

    @property
    def failed(self) -> bool:
        return self.phase == "Failed"


def manifest_document(text: str) -> dict[str, Any]:
    """The manifest's one YAML document, as a mapping (``ManifestError`` when it is not one)."""
    doc: dict[str, Any] = _manifest.load_yaml(text.encode())
    return doc


def check_manifest(text: str) -> None:
    """Check ``text`` as the ElasticJob manifest ``apply`` takes: ``ManifestError`` (field, reason) if not."""
    _manifest.parse_manifest(text)


@runtime_checkable
class JobsAPI(Protocol):
    def trainings(self) -> tuple[Training, ...]:
        """Every live job (placed or not), by name."""

    def training(self, name: str) -> Training | None:
        """How the job trains now; None when it is not known or ended."""

    def busy_nodes(self) -> frozenset[str]:
        """The nodes a live job's generation runs on."""

    def jobs_on(self, nodes: Collection[str]) -> tuple[str, ...]:
        """The live jobs with a member on one of ``nodes``, by name."""

    def data_on(self, node_id: str) -> tuple[JobData, ...]:
        """What each live job with a member on the node trains on, by job name."""

    def outcome(self, name: str) -> JobOutcome | None:
        """Where the job stands (None: not known, or deleted)."""

    def applying(self, name: str) -> bool:
        """True while an ``apply`` of ``name`` is under way: its record is being written and not yet in memory,
        so whoever follows the job must not read its absence as a deletion."""

    async def submit(self, manifest: str, by: str) -> bool:
        """Create the job from ``manifest``, or update its spec when it exists; True when it was created. Raises
        ``ManifestError`` (field, reason) for a bad manifest, ``NotLeader`` on a standby, and ``JobConflict``
        when the change cannot apply to a running job (e.g. a different model)."""

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
