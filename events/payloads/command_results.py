"""What each command action answers: the ack's ``result``, written by the agent and read by the coordinator.

One Struct (or mapping of Structs) per action; which action answers which is declared on its arguments
(``myolo.events.payloads.command_args``) and gathered in ``myolo.events.payloads.commands.ACTIONS``."""

from __future__ import annotations

from typing import Literal

import msgspec

from myolo.events.payloads.common import Health

Component = Literal["agent", "trainer"]  # what a release upgrades or rolls back


class ActionResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Base of the per-action result Structs. Unknown fields are ignored: a newer agent may say more."""


class FileDigest(ActionResult, kw_only=True):
    """One path of a ``hash_files`` result (keyed by path): its digest and size, or why it was not hashed."""

    sha256: str | None = None
    size: int | None = None
    error: str | None = None


HashFilesResult = dict[str, FileDigest]


TfRecordProblem = Literal["length", "data", "truncated"]


class TfRecordFile(ActionResult, kw_only=True):
    """One TFRecord file checked: its records until the first bad one, whose offset (the start of its header)
    and ``problem`` say where and what; ``error`` says it in words, or why the file was not read at all."""

    path: str
    size: int = 0
    records: int = 0  # good records before the first bad one (all of them when none is bad)
    bytes: int = 0  # data bytes of those records
    bad_offset: int | None = None
    problem: TfRecordProblem | None = None
    error: str | None = None


class TfRecordPattern(ActionResult, kw_only=True):
    """What one path or pattern of ``check_tfrecords`` matched, in name order, or why it matched nothing."""

    files: list[TfRecordFile] = []
    error: str | None = None
    truncated: bool = False  # more files matched than max_files: the rest were not checked


CheckTfrecordsResult = dict[str, TfRecordPattern]


class RuntimeVersions(ActionResult, kw_only=True):
    """What the trainer's interpreter says of its CUDA stack (None: a CPU build of torch has none), what the
    driver supports (``driver_cuda``: the highest CUDA version), and where ``ib_write_lat`` is (None: absent).
    ``error`` says why the trainer's interpreter could not answer."""

    torch: str | None = None
    cuda: str | None = None  # torch.version.cuda, e.g. "12.4"
    cudnn: str | None = None  # torch.backends.cudnn.version() as major.minor.patch, e.g. "9.1.0"
    gpus_visible: int | None = None  # torch.cuda.device_count() in the trainer's environment
    driver: str | None = None
    driver_cuda: str | None = None
    simulated: bool = False  # the driver's figures are the simulator's
    ib_write_lat: str | None = None
    error: str | None = None


class RdmaLatencyResult(ActionResult, kw_only=True):
    """One side of an ``ib_write_lat`` run: ``available`` false (with ``reason``) when the tool is not on the
    node; else the typical and average latency in microseconds the client measured (the server's side may
    report them too), or ``error``."""

    role: str
    available: bool = True
    reason: str | None = None
    size: int | None = None
    t_typical_us: float | None = None
    t_avg_us: float | None = None
    t_max_us: float | None = None
    error: str | None = None


class NcclProbeResult(ActionResult, kw_only=True):
    """A ``nccl_probe`` result: the sweep's summary (the full report goes on the reports topic)."""

    backend: str
    world_size: int
    points: int
    peak_busbw_gbps: float
    peak_size_bytes: int


class StartWorkersResult(ActionResult, kw_only=True):
    """A ``start_workers`` result: each local worker's pid by global rank (as a string, the JSON key), and the
    ranks that took over a warm standby instead of a cold start."""

    job_id: str
    generation: int
    pids: dict[str, int]
    world_size: int
    warm_ranks: list[int]


class StopWorkersResult(ActionResult, kw_only=True):
    """A ``stop_workers`` result, one job's in a ``drain``'s: ``stopped`` false with a ``note`` when that
    generation did not run here; else each worker's pid and exit code by global rank, the last step
    reported, whether rank 0 was asked to checkpoint, and the ranks that had to be terminated or killed."""

    job_id: str
    generation: int
    stopped: bool
    note: str | None = None
    pids: dict[str, int] | None = None
    exit_codes: dict[str, int | None] | None = None
    last_step: int | None = None
    asked_to_checkpoint: bool | None = None
    terminated: list[int] | None = None
    killed: list[int] | None = None


class SetIntervalResult(ActionResult, kw_only=True):
    interval_s: float
    previous_s: float


class ReportSampleResult(ActionResult, kw_only=True):
    """The extra sample taken: its seq, health and GPU count."""

    seq: int
    health: Health
    gpus: int


class DrainResult(ActionResult, kw_only=True):
    """Whether the node drains now, and the local jobs a drain stopped."""

    draining: bool
    stopped: list[StopWorkersResult]


class UpgradeResult(ActionResult, kw_only=True):
    """The release installed and switched to (``previous``: what ran before, for a rollback; ``restart``: how
    the agent restarts into it, None when it does not)."""

    component: Component
    version: str
    previous: str | None
    path: str
    sha256: str
    installed: bool  # False: it was installed already (same hash), nothing was fetched
    pruned: list[str]
    restart: str | None


class ProfileResult(ActionResult, kw_only=True):
    """A finished ``profile``: whose stacks, how many samples, over how long; ``ended_early`` when the worker
    exited before ``duration_s`` (the profile covers its life up to then)."""

    profile_id: str
    job_id: str
    rank: int
    pid: int
    samples: int
    seconds: float
    ended_early: bool = False


class RollbackResult(ActionResult, kw_only=True):
    """The release switched back to (``path`` None: the base install) and what ran before."""

    component: Component
    version: str
    previous: str | None
    path: str | None
    restart: str | None
