"""The arguments of each command action: one definition, checked by the coordinator before it sends and by
the agent before it accepts (a command that cannot run is rejected, never accepted and then failed).

Each Struct declares its action: the name (``action``) and what it answers (``result``, a type of
``myolo.events.payloads.command_results``); ``myolo.events.payloads.commands.ACTIONS`` lists them all."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import msgspec

from myolo.events.errors import InvalidEvent
from myolo.events.payloads.command_results import (
    CheckTfrecordsResult,
    Component,
    DrainResult,
    HashFilesResult,
    NcclProbeResult,
    ProfileResult,
    RdmaLatencyResult,
    ReportSampleResult,
    RollbackResult,
    RuntimeVersions,
    SetIntervalResult,
    StartWorkersResult,
    StopWorkersResult,
    UpgradeResult,
)
from myolo.events.payloads.common import Host, Id, NonNegInt
from myolo.events.payloads.external import Sha256
from myolo.events.payloads.trainer_job import TrainerJob


class ActionArgs(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """Base of the per-action argument Structs: an unknown argument is an error naming it. ``action`` names
    the action the Struct is the arguments of: a command is issued with its arguments alone."""

    action: ClassVar[str]  # the action's name on the wire (``Command.action``)
    result: ClassVar[Any]  # what the action answers: the ack's ``result`` read as this type

    def check(self) -> None:
        """Rules across fields, which types alone cannot say; raise :class:`InvalidEvent` naming the field."""


class SetIntervalArgs(ActionArgs, kw_only=True):
    """Set the agent's sample interval now (until its configuration is read again)."""

    action = "set_interval"
    result = SetIntervalResult

    interval_s: Annotated[float, msgspec.Meta(ge=0.05, le=3600.0)]


class ReportSampleArgs(ActionArgs, kw_only=True):
    """Take and publish one extra full sample now."""

    action = "report_sample"
    result = ReportSampleResult


class NcclProbeArgs(ActionArgs, kw_only=True):
    """An all-reduce bandwidth sweep across ``world_size`` local ranks; ``sizes`` None means the probe's
    default sweep. The full report goes on the reports topic, the ack carries its summary."""

    action = "nccl_probe"
    result = NcclProbeResult

    world_size: Annotated[int, msgspec.Meta(ge=2, le=64)] = 2
    sizes: (
        Annotated[list[Annotated[int, msgspec.Meta(ge=1, le=8 << 30)]], msgspec.Meta(min_length=1, max_length=32)]
        | None
    ) = None
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    iters: Annotated[int, msgspec.Meta(ge=1, le=1000)] | None = None
    warmup: Annotated[int, msgspec.Meta(ge=0, le=100)] | None = None
    dtype: Literal["float32", "float16", "bfloat16"] | None = None
    timeout_s: Annotated[float, msgspec.Meta(ge=1.0, le=3600.0)] = 300.0


class DrainArgs(ActionArgs, kw_only=True):
    """Mark the node draining (no new workers start here) and stop its jobs' workers with a checkpoint;
    ``draining=false`` lifts a drain."""

    action = "drain"
    result = DrainResult

    draining: bool = True
    reason: Annotated[str, msgspec.Meta(max_length=500)] | None = None


GpuIndex = Annotated[int, msgspec.Meta(ge=0, le=63)]


class StartWorkersArgs(ActionArgs, kw_only=True):
    """Start this node's share of a job generation: one worker per GPU in ``gpus``.

    As with torchrun, every node of a job runs the same number of workers, so the world size is
    ``nnodes x len(gpus)`` and this node's workers get global ranks ``node_rank x len(gpus) + local_rank``.
    ``master_addr:master_port`` is the rendezvous (global rank 0's node)."""

    action = "start_workers"
    result = StartWorkersResult

    job_id: Id
    generation: NonNegInt
    node_rank: Annotated[int, msgspec.Meta(ge=0, le=4095)]
    nnodes: Annotated[int, msgspec.Meta(ge=1, le=4096)]
    gpus: Annotated[list[GpuIndex], msgspec.Meta(min_length=1, max_length=64)]
    master_addr: Host
    master_port: Annotated[int, msgspec.Meta(ge=1, le=65535)]
    job: TrainerJob = msgspec.field(default_factory=TrainerJob)

    def check(self) -> None:
        if self.node_rank >= self.nnodes:
            raise InvalidEvent(f"node_rank {self.node_rank} must be below nnodes {self.nnodes}", "args.node_rank")
        if len(set(self.gpus)) != len(self.gpus):
            twice = sorted({g for g in self.gpus if self.gpus.count(g) > 1})
            raise InvalidEvent(f"GPU {twice[0]} is listed twice; give each worker its own GPU", "args.gpus")

    @property
    def world_size(self) -> int:
        return self.nnodes * len(self.gpus)

    def global_rank(self, local_rank: int) -> int:
        return self.node_rank * len(self.gpus) + local_rank


class StopWorkersArgs(ActionArgs, kw_only=True):
    """Stop this node's workers of a job generation. ``checkpoint``: the node holding global rank 0 asks
    the job to save and stop after the current step, and every node waits a bounded time for its workers
    to leave on their own before SIGTERM, then SIGKILL."""

    action = "stop_workers"
    result = StopWorkersResult

    job_id: Id
    generation: NonNegInt
    checkpoint: bool = True


Version = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")]


class UpgradeArgs(ActionArgs, kw_only=True):
    """Install ``version`` of ``component`` beside the current one (``<releases>/<component>/<version>``) from
    ``artifact`` (a wheel: a path, ``file://`` or ``https://`` URL) after checking its SHA-256, switch the
    ``current`` link atomically, keep the previous version for rollback, and restart into it (``restart``)."""

    action = "upgrade"
    result = UpgradeResult

    component: Component
    version: Version
    artifact: Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]
    sha256: Sha256
    rollout: Annotated[str, msgspec.Meta(max_length=128)] | None = None  # the rollout it belongs to, for logs
    restart: bool = True


class RollbackArgs(ActionArgs, kw_only=True):
    """Switch ``component``'s ``current`` link back to ``version`` (installed already: the one before an
    upgrade) and restart into it."""

    action = "rollback"
    result = RollbackResult

    component: Component
    version: Version
    rollout: Annotated[str, msgspec.Meta(max_length=128)] | None = None
    restart: bool = True


class HashFilesArgs(ActionArgs, kw_only=True):
    """SHA-256 of files on the node (pre-flight: a job's data against what it recorded); ``max_bytes`` bounds
    what one command may read."""

    action = "hash_files"
    result = HashFilesResult

    paths: Annotated[
        list[Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]], msgspec.Meta(min_length=1, max_length=64)
    ]
    max_bytes: Annotated[int, msgspec.Meta(ge=1, le=1 << 44)] = 1 << 40


class CheckTfrecordsArgs(ActionArgs, kw_only=True):
    """Check every record (length, masked CRC-32C of length and data) of TFRecord files on the node (pre-flight:
    a job whose data are TFRecord files). Each of ``paths`` is an absolute path or glob pattern (``*``, ``?``,
    ``[...]``), expanded on the node to at most ``max_files`` files; ``max_bytes`` bounds what one command reads."""

    action = "check_tfrecords"
    result = CheckTfrecordsResult

    paths: Annotated[
        list[Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]], msgspec.Meta(min_length=1, max_length=64)
    ]
    max_bytes: Annotated[int, msgspec.Meta(ge=1, le=1 << 44)] = 1 << 40
    max_files: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 4096


class RuntimeVersionsArgs(ActionArgs, kw_only=True):
    """The CUDA and cuDNN versions the trainer's interpreter sees on the node (``torch.version.cuda``,
    ``torch.backends.cudnn.version()``), beside the driver's, and whether ``ib_write_lat`` is installed."""

    action = "runtime_versions"
    result = RuntimeVersions

    timeout_s: Annotated[float, msgspec.Meta(ge=1.0, le=600.0)] = 120.0  # importing torch takes seconds


class RdmaLatencyArgs(ActionArgs, kw_only=True):
    """A short ``ib_write_lat`` run between two nodes: the ``server`` waits on ``port`` for one run, the
    ``client`` connects to ``peer`` (the server node's address) and reports the latency it measured."""

    action = "rdma_latency"
    result = RdmaLatencyResult

    role: Literal["server", "client"]
    peer: Host | None = None
    port: Annotated[int, msgspec.Meta(ge=1024, le=65535)] = 18515
    size: Annotated[int, msgspec.Meta(ge=1, le=1 << 20)] = 2
    iters: Annotated[int, msgspec.Meta(ge=5, le=100_000)] = 1000
    device: Annotated[str, msgspec.Meta(max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")] | None = None
    timeout_s: Annotated[float, msgspec.Meta(ge=1.0, le=300.0)] = 30.0

    def check(self) -> None:
        if (self.role == "client") != (self.peer is not None):
            raise InvalidEvent("a client needs the server's address as peer; a server takes none", "args.peer")


MAX_PROFILE_S = 600.0  # a profile's longest run: py-spy's own cost on the worker is a few % while it samples
# names a file on the node: letters, digits and ._- only, never a path
ProfileId = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]


class ProfileArgs(ActionArgs, kw_only=True):
    """Sample one trainer worker's stacks with py-spy for ``duration_s``, ``rate_hz`` times a second (``native``:
    C/C++ frames too). The agent keeps the folded stacks under ``profile_id`` for ``GET /v1/profiles/{id}``."""

    action = "profile"
    result = ProfileResult

    profile_id: ProfileId
    job_id: Id
    rank: NonNegInt
    generation: NonNegInt | None = None  # the generation the caller means (None: whichever runs)
    duration_s: Annotated[float, msgspec.Meta(gt=0, le=MAX_PROFILE_S)] = 30.0
    rate_hz: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 100
    native: bool = False
