"""The dashboard's own pages (what no other component keeps: the rings of recent samples, the merged timeline)
and the catalogue of every page, as msgspec Structs: what ``/ui/api/...`` answers."""

from __future__ import annotations

import msgspec

from myolo.coordinator.core.dashboard import Boards, Moment
from myolo.coordinator.ui.history import METRICS, JobRings, NodeRings
from myolo.events.payloads.training import WorkerInfo


class PageEntry(msgspec.Struct, kw_only=True, frozen=True):
    name: str
    title: str  # empty: not in the menu (reached by a link)
    component: str  # the live feed names components: a page reloads when its component changed
    keyed: bool = False


class Catalogue(msgspec.Struct, kw_only=True, frozen=True):
    """Every page the components declare, in their order, and who is logged in."""

    who: str
    pages: list[PageEntry]


class GpuCurves(msgspec.Struct, kw_only=True, frozen=True):
    index: int
    util: list[float | None]
    mem: list[float | None]
    temp: list[float | None]
    power: list[float | None]


class NodeHistory(msgspec.Struct, kw_only=True, frozen=True):
    """One node's GPU curves over the ring (times on the coordinator's clock) and its workers now."""

    node_id: str
    step_s: float
    times: list[float]
    gpus: list[GpuCurves]
    workers: list[WorkerInfo] = []


class ProgressPoint(msgspec.Struct, frozen=True, array_like=True):
    """``[time, generation, step, loss, tokens/s]`` (compact: a job keeps up to thousands)."""

    time: float
    generation: int
    step: int
    loss: float | None
    tokens_per_s: float


class JobHistory(msgspec.Struct, kw_only=True, frozen=True):
    job: str
    points: list[ProgressPoint]


class Timeline(msgspec.Struct, kw_only=True, frozen=True):
    items: list[Moment]


def catalogue(boards: Boards, who: str) -> Catalogue:
    pages = [
        PageEntry(name=p.name, title=p.title, component=comp, keyed=p.keyed)
        for comp, part in boards.parts.items()
        for p in part.panels
    ]
    return Catalogue(who=who, pages=pages)


def node_history(rings: NodeRings, node_id: str | None) -> NodeHistory | None:
    """The node's curves; empty for a node not sampled yet (the node page itself says whether it exists)."""
    if node_id is None:
        return None
    ring = rings.rings.get(node_id)
    if ring is None:
        return NodeHistory(node_id=node_id, step_s=rings.step_s, times=[], gpus=[])
    order = ring.ordered()
    gpus = [
        GpuCurves(index=g, **{m: ring.series(g, k) for k, m in enumerate(METRICS)})  # type: ignore[arg-type]
        for g in range(ring.gpus)
    ]
    return NodeHistory(
        node_id=node_id,
        step_s=rings.step_s,
        times=[ring.times[i] for i in order],
        gpus=gpus,
        workers=list(ring.workers),
    )


def job_history(rings: JobRings, job: str | None) -> JobHistory | None:
    """The job's progress points; empty for a job that reported none yet."""
    if job is None:
        return None
    return JobHistory(job=job, points=[ProgressPoint(*p) for p in rings.jobs.get(job, ())])


def timeline(boards: Boards, limit: int) -> Timeline:
    return Timeline(items=boards.moments(limit))
