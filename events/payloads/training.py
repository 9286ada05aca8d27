"""Training events: progress pushed by workers to their agent over ZeroMQ and republished to Kafka, the
agent's faults and completions of a job's workers, and the worker <-> agent messages."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from myolo.events.payloads.common import Id, NonNegFloat, NonNegInt, Payload
from myolo.events.payloads.models import ModelExport

# the first frame of a worker -> agent ZeroMQ message says which Struct the second frame holds
ZMQ_PROGRESS_TOPIC = b"progress"  # a TrainingProgress
ZMQ_HEARTBEAT_TOPIC = b"heartbeat"  # a WorkerHeartbeat


class TrainingProgress(Payload, kw_only=True):
    """``ai.myolo.training.progress.v1``: one optimizer step of one worker (or its data-parallel replica).

    ``gradient_staleness`` is the number of optimizer steps since this replica's gradients last entered a
    global reduction: 0 when fully synchronous, up to H-1 with ``sync_every H``."""

    job_id: Id
    generation: NonNegInt = 0
    rank: NonNegInt
    world_size: NonNegInt
    dp_rank: NonNegInt = 0
    step: NonNegInt
    loss: float
    tokens_per_s: NonNegFloat
    step_time_s: NonNegFloat
    grad_norm: NonNegFloat | None = None
    gradient_staleness: NonNegInt = 0
    lr: NonNegFloat | None = None
    mfu: NonNegFloat | None = None
    mem_allocated_bytes: NonNegInt | None = None
    mem_reserved_bytes: NonNegInt | None = None
    host_rss_bytes: NonNegInt | None = None
    exchange_bytes: NonNegInt | None = None  # sent by this replica in the step's defended gradient exchange
    # the bus bandwidth of an all-reduce over the whole job, measured after the generation's first step (GB/s)
    allreduce_busbw_gbps: NonNegFloat | None = None
    backends: dict[str, str] = {}
    node_id: str | None = None


class WorkerHeartbeat(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Worker -> agent over ZeroMQ, from every rank, so the agent can tell which rank hung or died.

    ``step`` is the last finished optimizer step (-1 before the first); ``sent_at`` wall-clock seconds."""

    job_id: str
    generation: int
    rank: int
    world_size: int
    step: int
    pid: int
    sent_at: float


class ControlMessage(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Agent -> worker over ZeroMQ: ``checkpoint`` now, or ``stop`` after the current step.

    ``job_id``/``generation`` fence it: a worker of another generation (left over from before a resize)
    ignores it instead of stopping or saving the wrong run."""

    kind: Literal["checkpoint", "stop"]
    job_id: str
    generation: int


WorkerState = Literal["starting", "running", "stopping", "exited"]
LogLine = Annotated[str, msgspec.Meta(max_length=1000)]
MAX_LOG_TAIL = 50


class WorkerInfo(Payload, kw_only=True):
    """One trainer process the agent supervises, as the node sample, ``/healthz`` and ``status`` show it.

    ``last_step`` is the last optimizer step its heartbeats or progress reported (None before the first);
    ``exit_code`` is set once it exited (negative: killed by that signal)."""

    job_id: Id
    generation: NonNegInt
    rank: NonNegInt
    local_rank: NonNegInt
    gpu: NonNegInt
    pid: NonNegInt
    state: WorkerState
    last_step: int | None = None
    exit_code: int | None = None


class TrainingFault(Payload, kw_only=True):
    """``ai.myolo.training.fault.v1``: a worker of a job died or hung on a node, published the moment the
    agent sees it. Keyed by job id, so it is ordered with the job's progress.

    ``worker_exit``: the process ended with a non-zero ``exit_code`` or by ``signal`` (e.g. ``SIGKILL``).
    ``worker_hang``: no heartbeat or step for ``silent_s`` seconds, over the learned ``bound_s``
    (max(floor, k x the job's recent step time)); the agent then stops the node's workers."""

    job_id: Id
    generation: NonNegInt
    node_id: Id
    kind: Literal["worker_exit", "worker_hang"]
    rank: NonNegInt
    pid: NonNegInt | None = None
    exit_code: int | None = None
    signal: Annotated[str, msgspec.Meta(max_length=32)] | None = None
    last_step: int | None = None
    silent_s: NonNegFloat | None = None
    bound_s: NonNegFloat | None = None
    log_tail: Annotated[list[LogLine], msgspec.Meta(max_length=MAX_LOG_TAIL)] = []
    message: Annotated[str, msgspec.Meta(max_length=2000)] | None = None
    simulated: bool = False


class TrainingCompleted(Payload, kw_only=True):
    """``ai.myolo.training.completed.v1``: every worker of a job generation on this node exited 0 on its own
    (not because it was told to stop). ``last_step`` is the last step reported."""

    job_id: Id
    generation: NonNegInt
    node_id: Id
    ranks: Annotated[list[NonNegInt], msgspec.Meta(max_length=1024)]
    last_step: int | None = None
    duration_s: NonNegFloat | None = None
    simulated: bool = False
    export: ModelExport | None = None  # from the node of rank 0, when the job exported its weights
