"""Training progress, pushed by workers to their agent over ZeroMQ and republished to Kafka."""

from __future__ import annotations

from typing import Literal

import msgspec

from events.payloads.common import Id, NonNegFloat, NonNegInt, Payload


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
