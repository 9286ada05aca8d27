"""What a training run reports: a start record, one record per step, an end record; and the step as progress.

Why Structs and not dicts: the same step goes to the launcher (live line, ``--json``), to ``RunResult`` and,
per data-parallel replica, to the agent as a ``TrainingProgress``. A field renamed on either side then fails
where the record is built (and at type-check time) instead of being dropped on the way.
"""

from __future__ import annotations

import msgspec

from myolo.events.payloads import TrainingProgress


class StartRecord(msgspec.Struct, tag="start", tag_field="event", kw_only=True):
    model: str
    params: int
    layout: str
    device: str
    dtype: str
    global_batch: int
    seq_len: int
    microbatches: int
    start_step: int
    backends: dict[str, str]  # resolved per op at start; steps report what ran


class StepRecord(msgspec.Struct, tag="step", tag_field="event", kw_only=True, omit_defaults=True):
    step: int
    steps: int
    loss: float  # mean over all replicas
    tokens_per_s: float
    step_time_s: float
    grad_norm: float
    lr: float
    mfu: float | None
    gradient_staleness: int
    backends: dict[str, str]
    host_rss_bytes: int | None
    mem_allocated_bytes: int | None = None  # CUDA only: left out of the record on CPU
    mem_reserved_bytes: int | None = None
    exchange_bytes: int | None = None  # sent by this replica in the defended gradient exchange (--defense)
    allreduce_busbw_gbps: float | None = None  # the job's own all-reduce, measured after a generation's first step


class EndRecord(msgspec.Struct, tag="end", tag_field="event", kw_only=True):
    steps: int
    loss: float
    tokens_per_s: float
    stopped_early: bool


Record = StartRecord | StepRecord | EndRecord

# StepRecord fields that only the launcher shows; every other one reaches TrainingProgress.
DISPLAY_ONLY = frozenset({"steps"})


def progress_payload(
    rec: StepRecord, *, job_id: str, rank: int, world_size: int, dp_rank: int, replica_loss: float
) -> TrainingProgress:
    """One replica's step for its agent: the replica's own loss, not the mean over replicas."""
    return TrainingProgress(
        job_id=job_id,
        rank=rank,
        world_size=world_size,
        dp_rank=dp_rank,
        step=rec.step,
        loss=replica_loss,
        tokens_per_s=rec.tokens_per_s,
        step_time_s=rec.step_time_s,
        grad_norm=rec.grad_norm,
        gradient_staleness=rec.gradient_staleness,
        lr=rec.lr,
        mfu=rec.mfu,
        mem_allocated_bytes=rec.mem_allocated_bytes,
        mem_reserved_bytes=rec.mem_reserved_bytes,
        host_rss_bytes=rec.host_rss_bytes,
        exchange_bytes=rec.exchange_bytes,
        allreduce_busbw_gbps=rec.allreduce_busbw_gbps,
        backends=rec.backends,
    )
