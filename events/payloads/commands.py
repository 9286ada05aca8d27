"""Commands from the coordinator to agents, and their acknowledgements.

A command carries the leader's ``epoch``: an agent that has seen a newer epoch rejects it, which fences a
stale leader. ``command_id`` is stable across retries so an agent executes each command once."""

from __future__ import annotations

import typing
from typing import Annotated, Any, ClassVar, Literal, get_args

import msgspec

from myolo.common.errors import validation_problem
from myolo.events.errors import InvalidEvent
from myolo.events.payloads.common import Health, Host, Id, NonNegFloat, NonNegInt, Payload
from myolo.events.payloads.external import Sha256
from myolo.events.payloads.trainer_job import TrainerJob

CommandAction = Literal[
    "nccl_probe",
    "report_sample",
    "set_interval",
    "start_workers",
    "stop_workers",
    "checkpoint",
    "drain",
    "upgrade",
    "rollback",
    "hash_files",
    "profile",
    "check_tfrecords",
    "runtime_versions",
    "rdma_latency",
]


class Command(Payload, kw_only=True):
    """``ai.myolo.command.v1``: something a node must do. Signed; see ``myolo.events.signing``."""

    command_id: Id
    node_id: Id
    epoch: NonNegInt
    action: CommandAction
    args: dict[str, Any] = {}
    issued_by: str | None = None
    expires_at: NonNegFloat | None = None


# ---- what becomes of a command: the one definition of its statuses, for agent and coordinator alike

AckStatus = Literal["accepted", "done", "rejected", "failed", "duplicate"]
"""What an agent says of a command: taken (``accepted``), ran (``done``/``failed``), refused without running
(``rejected``), or a retry of an id that already ran (``duplicate``, with the original outcome beside it)."""
Outcome = Literal["done", "failed"]
"""What a command came to, in the end: judged by :func:`outcome`, never by the status alone."""
CommandStatus = Literal["pending", AckStatus, "expired"]
"""A command as the coordinator records it: ``pending`` until an agent answers, ``expired`` when none did."""
TERMINAL: frozenset[str] = frozenset({"done", "rejected", "failed", "duplicate", "expired"})
ACK_STATUSES: tuple[str, ...] = get_args(AckStatus)


def outcome(status: str, original: Outcome | None = None) -> Outcome | None:
    """What a command came to: ``done``, ``failed`` (rejected, failed, expired, or a duplicate of a failed
    run) or None while it is still on its way. A ``duplicate`` is judged by the ``original`` outcome it
    carries; one that carries none (an agent that does not say) counts as failed, since nothing shows it ran."""
    if status == "done":
        return "done"
    if status == "duplicate":
        return original or "failed"
    if status in TERMINAL:
        return "failed"
    return None


class CommandAck(Payload, kw_only=True):
    """``ai.myolo.command.ack.v1``: what became of a command on the node. A ``duplicate`` ack carries the
    first run's outcome in ``original`` and its result in ``result``."""

    command_id: Id
    node_id: Id
    epoch: NonNegInt
    status: AckStatus
    reason: str | None = None
    result: dict[str, Any] = {}
    original: Outcome | None = None

    @property
    def outcome(self) -> Outcome | None:
        return outcome(self.status, self.original)


# ---- the arguments of each action: one definition, checked by the coordinator before it sends and by the
# ---- agent before it accepts (a command that cannot run is rejected, never accepted and then failed)


class ActionArgs(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """Base of the per-action argument Structs: an unknown argument is an error naming it. ``action`` names
    the action the Struct is the arguments of: a command is issued with its arguments alone."""

    action: ClassVar[CommandAction]

    def check(self) -> None:
        """Rules across fields, which types alone cannot say; raise :class:`InvalidEvent` naming the field."""


class SetIntervalArgs(ActionArgs, kw_only=True):
    action = "set_interval"

    interval_s: Annotated[float, msgspec.Meta(ge=0.05, le=3600.0)]


class ReportSampleArgs(ActionArgs, kw_only=True):
    action = "report_sample"


class NcclProbeArgs(ActionArgs, kw_only=True):
    """``sizes`` None means the probe's default sweep."""

    action = "nccl_probe"

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
    """``draining=false`` lifts a drain."""

    action = "drain"

    draining: bool = True
    reason: Annotated[str, msgspec.Meta(max_length=500)] | None = None


GpuIndex = Annotated[int, msgspec.Meta(ge=0, le=63)]


class StartWorkersArgs(ActionArgs, kw_only=True):
    """Start this node's share of a job generation: one worker per GPU in ``gpus``.

    As with torchrun, every node of a job runs the same number of workers, so the world size is
    ``nnodes x len(gpus)`` and this node's workers get global ranks ``node_rank x len(gpus) + local_rank``.
    ``master_addr:master_port`` is the rendezvous (global rank 0's node)."""

    action = "start_workers"

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

    job_id: Id
    generation: NonNegInt
    checkpoint: bool = True


Component = Literal["agent", "trainer"]
Version = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")]


class UpgradeArgs(ActionArgs, kw_only=True):
    """Install ``version`` of ``component`` beside the current one (``<releases>/<component>/<version>``) from
    ``artifact`` (a wheel: a path, ``file://`` or ``https://`` URL) after checking its SHA-256, switch the
    ``current`` link atomically, keep the previous version for rollback, and restart into it (``restart``)."""

    action = "upgrade"

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

    component: Component
    version: Version
    rollout: Annotated[str, msgspec.Meta(max_length=128)] | None = None
    restart: bool = True


class HashFilesArgs(ActionArgs, kw_only=True):
    """SHA-256 of files on the node (pre-flight: a job's data against what it recorded); ``max_bytes`` bounds
    what one command may read."""

    action = "hash_files"

    paths: Annotated[
        list[Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]], msgspec.Meta(min_length=1, max_length=64)
    ]
    max_bytes: Annotated[int, msgspec.Meta(ge=1, le=1 << 44)] = 1 << 40


class CheckTfrecordsArgs(ActionArgs, kw_only=True):
    """Check every record (length, masked CRC-32C of length and data) of TFRecord files on the node (pre-flight:
    a job whose data are TFRecord files). Each of ``paths`` is an absolute path or glob pattern (``*``, ``?``,
    ``[...]``), expanded on the node to at most ``max_files`` files; ``max_bytes`` bounds what one command reads."""

    action = "check_tfrecords"

    paths: Annotated[
        list[Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]], msgspec.Meta(min_length=1, max_length=64)
    ]
    max_bytes: Annotated[int, msgspec.Meta(ge=1, le=1 << 44)] = 1 << 40
    max_files: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 4096


class RuntimeVersionsArgs(ActionArgs, kw_only=True):
    """The CUDA and cuDNN versions the trainer's interpreter sees on the node (``torch.version.cuda``,
    ``torch.backends.cudnn.version()``), beside the driver's, and whether ``ib_write_lat`` is installed."""

    action = "runtime_versions"

    timeout_s: Annotated[float, msgspec.Meta(ge=1.0, le=600.0)] = 120.0  # importing torch takes seconds


class RdmaLatencyArgs(ActionArgs, kw_only=True):
    """A short ``ib_write_lat`` run between two nodes: the ``server`` waits on ``port`` for one run, the
    ``client`` connects to ``peer`` (the server node's address) and reports the latency it measured."""

    action = "rdma_latency"

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

    profile_id: ProfileId
    job_id: Id
    rank: NonNegInt
    generation: NonNegInt | None = None  # the generation the caller means (None: whichever runs)
    duration_s: Annotated[float, msgspec.Meta(gt=0, le=MAX_PROFILE_S)] = 30.0
    rate_hz: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 100
    native: bool = False


# ---- what actions answer (the ack's ``result``): one definition, written by the agent, read by the coordinator


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


ACTION_ARGS: dict[str, type[ActionArgs]] = {
    cls.action: cls
    for cls in (
        SetIntervalArgs,
        ReportSampleArgs,
        NcclProbeArgs,
        DrainArgs,
        StartWorkersArgs,
        StopWorkersArgs,
        UpgradeArgs,
        RollbackArgs,
        HashFilesArgs,
        ProfileArgs,
        CheckTfrecordsArgs,
        RuntimeVersionsArgs,
        RdmaLatencyArgs,
    )
}


ACTION_RESULTS: dict[str, type[ActionResult] | type[HashFilesResult] | type[CheckTfrecordsResult]] = {
    "set_interval": SetIntervalResult,
    "report_sample": ReportSampleResult,
    "nccl_probe": NcclProbeResult,
    "drain": DrainResult,
    "start_workers": StartWorkersResult,
    "stop_workers": StopWorkersResult,
    "upgrade": UpgradeResult,
    "rollback": RollbackResult,
    "hash_files": HashFilesResult,
    "profile": ProfileResult,
    "check_tfrecords": CheckTfrecordsResult,
    "runtime_versions": RuntimeVersions,
    "rdma_latency": RdmaLatencyResult,
}


def action_result(action: str, result: dict[str, Any]) -> Any:
    """An ack's ``result`` read as its action's result type (``ACTION_RESULTS``); ``InvalidEvent`` names the
    field when it does not read."""
    tp = ACTION_RESULTS.get(action)
    if tp is None:
        raise InvalidEvent(
            f"{action!r} is not an action agents execute; use one of {', '.join(ACTION_RESULTS)}", "action"
        )
    try:
        return msgspec.convert(result, tp)
    except msgspec.ValidationError as exc:
        problem = validation_problem(exc)
        raise InvalidEvent(problem.message, f"result{problem.field}") from None


def action_args(action: str, args: dict[str, Any]) -> ActionArgs:
    """Validate a command's arguments; :class:`InvalidEvent` names the field (``args.interval_s``) and why."""
    cls = ACTION_ARGS.get(action)
    if cls is None:
        raise InvalidEvent(f"{action!r} is not an action agents execute; use one of {', '.join(ACTION_ARGS)}", "action")
    try:
        checked = msgspec.convert(args, cls, strict=True)
    except msgspec.ValidationError as exc:
        problem = validation_problem(exc)
        msg, path, nested = problem.message, problem.field, problem.parent
        if problem.kind == "unknown":
            takes = _fields_at(cls, nested)
            msg = f"unknown {'field' if nested else 'argument'} for {action}; {'it' if not nested else nested[1:]} takes {takes}"
        elif problem.kind == "missing":
            msg = "missing required argument"
        elif msg.startswith("Invalid enum value") and (choices := _choices_at(cls, path)):
            msg = f"{msg}; choose one of {choices}"
        raise InvalidEvent(msg, f"args{path}") from None
    checked.check()
    return checked


def _type_at(cls: type[msgspec.Struct], path: str) -> Any:
    """The declared type of the field at ``path`` (``.job.schedule``) under ``cls``; None if not found."""
    tp: Any = cls
    for name in [p.split("[")[0] for p in path.split(".") if p]:
        if not (isinstance(tp, type) and issubclass(tp, msgspec.Struct)):
            return None
        field = next((f for f in msgspec.structs.fields(tp) if f.name == name), None)
        if field is None:
            return None
        tp = field.type
    return tp


def _fields_at(cls: type[msgspec.Struct], path: str) -> str:
    """The fields of the Struct at ``path`` under ``cls``, for an "unknown field" message."""
    tp = _type_at(cls, path)
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return ", ".join(tp.__struct_fields__) or "none"
    return "other fields"


def _choices_at(cls: type[msgspec.Struct], path: str) -> str | None:
    """``a, b`` when the field at ``path`` is a Literal, for an "invalid enum value" message."""
    tp = _type_at(cls, path)
    for arg in (tp, *typing.get_args(tp)):
        if typing.get_origin(arg) is Literal:
            return ", ".join(map(str, typing.get_args(arg)))
    return None
