"""What the dashboard shows of the jobs: a row per job (phase, replicas min/current/max, step, tokens/s,
restarts), one job in full (its generations' layout and every decision with its reason), the GPUs each
running generation holds (the fleet page's allocated and allocated-but-idle GPUs), and the decisions for the
events timeline."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import msgspec

from myolo.coordinator.core.dashboard import Moment
from myolo.coordinator.jobs.records import JobRecord


class JobRow(msgspec.Struct, kw_only=True, frozen=True):
    name: str
    phase: str
    reason: str
    replicas_min: int
    replicas_current: int
    replicas_max: int
    generation: int | None
    step: int
    loss: float | None
    tokens_per_s: float | None
    restarts: int
    updated: float
    labels: dict[str, str] = {}


class JobsBoard(msgspec.Struct, kw_only=True, frozen=True):
    now: float
    items: list[JobRow]


class JobBoard(msgspec.Struct, kw_only=True, frozen=True):
    """One job: its row and its record (spec, current and previous generation, decisions, newest last)."""

    now: float
    row: JobRow
    record: JobRecord


class Allocation(msgspec.Struct, frozen=True, array_like=True):
    """``[node id, GPU indexes, job, generation]``: GPUs a job's generation holds."""

    node_id: str
    gpus: list[int]
    job: str
    generation: int


class Allocations(msgspec.Struct, kw_only=True, frozen=True):
    items: list[Allocation]


def row(rec: JobRecord) -> JobRow:
    gen, spec, progress = rec.status.generation, rec.spec.job, rec.status.progress
    return JobRow(
        name=rec.name,
        phase=rec.status.phase,
        reason=rec.status.reason,
        replicas_min=spec.min_replicas,
        replicas_current=gen.replicas if gen is not None and not rec.terminal else 0,
        replicas_max=spec.max_replicas,
        generation=gen.number if gen is not None else None,
        step=progress.step,
        loss=progress.loss,
        tokens_per_s=progress.tokens_per_s,
        restarts=rec.status.restarts,
        updated=rec.status.updated,
        labels=dict(spec.labels),
    )


def board(records: Iterable[JobRecord], now: float) -> JobsBoard:
    return JobsBoard(now=now, items=[row(r) for r in sorted(records, key=lambda r: r.name)])


def one(rec: JobRecord | None, now: float) -> JobBoard | None:
    return None if rec is None else JobBoard(now=now, row=row(rec), record=rec)


def allocations(records: Iterable[JobRecord]) -> Allocations:
    items = [
        Allocation(m.node_id, list(m.gpus), r.name, r.status.generation.number)
        for r in records
        if r.status.generation is not None and not r.terminal
        for m in r.status.generation.members
    ]
    return Allocations(items=items)


def moments(records: Iterable[JobRecord]) -> Iterator[Moment]:
    for r in records:
        for d in r.status.decisions:
            gen = f" g{d.generation}" if d.generation is not None else ""
            size = f" -> {d.replicas} replicas" if d.replicas is not None else ""
            yield Moment(time=d.time, kind="decision", subject=r.name, text=f"{d.kind}{gen}{size} ({d.by}): {d.reason}")
