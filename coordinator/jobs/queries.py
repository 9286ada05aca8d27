"""The jobs component's answers to other components' questions, read from its records: which nodes train,
how a job trains now, what data it reads, how it ended. Pure functions of the records, so the answers are the
same on every coordinator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable

from myolo.coordinator.jobs.interface import JobData, JobOutcome, Training
from myolo.coordinator.jobs.records import JobRecord


def training(rec: JobRecord) -> Training | None:
    """How a live job trains now (a job not placed yet has no nodes); None for an ended job."""
    if rec.terminal:
        return None
    gen, p = rec.status.generation, rec.status.progress
    return Training(
        job=rec.name,
        nodes=tuple(gen.node_ids) if gen is not None else (),
        running=gen is not None and gen.stage == "running",
        first_step_at=gen.first_step_at if gen is not None else None,
        tokens_per_s=p.tokens_per_s,
        reported=p.updated,
    )


def trainings(records: Iterable[JobRecord]) -> tuple[Training, ...]:
    return tuple(t for r in sorted(records, key=lambda r: r.name) if (t := training(r)) is not None)


def busy_nodes(records: Iterable[JobRecord]) -> frozenset[str]:
    return frozenset(n for t in trainings(records) for n in t.nodes)


def jobs_on(records: Iterable[JobRecord], nodes: Collection[str]) -> tuple[str, ...]:
    return tuple(t.job for t in trainings(records) if not set(nodes).isdisjoint(t.nodes))


def data_on(records: Iterable[JobRecord], node_id: str) -> tuple[JobData, ...]:
    """The data of each live job whose current generation has a member on the node, by job name."""
    out = []
    for rec in sorted(records, key=lambda r: r.name):
        gen = rec.status.generation
        if rec.terminal or gen is None or gen.member(node_id) is None:
            continue
        trainer = rec.spec.job.trainer
        out.append(JobData(job=rec.name, data_path=trainer.data.path, data_sha256=trainer.data.sha256))
    return tuple(out)


def outcome(rec: JobRecord) -> JobOutcome:
    return JobOutcome(job=rec.name, phase=rec.status.phase, reason=rec.status.reason, updated=rec.status.updated)


class JobQueries:
    """The ``JobsAPI`` queries, answered from ``records`` (the job records by name) for whoever keeps them, and
    ``submit`` through their ``apply``."""

    records: dict[str, JobRecord]
    apply: Callable[[str, str], Awaitable[tuple[JobRecord, bool]]]

    async def submit(self, manifest: str, by: str) -> bool:
        _, created = await self.apply(manifest, by)
        return created

    def trainings(self) -> tuple[Training, ...]:
        return trainings(self.records.values())

    def training(self, name: str) -> Training | None:
        rec = self.records.get(name)
        return None if rec is None else training(rec)

    def busy_nodes(self) -> frozenset[str]:
        return busy_nodes(self.records.values())

    def jobs_on(self, nodes: Collection[str]) -> tuple[str, ...]:
        return jobs_on(self.records.values(), nodes)

    def data_on(self, node_id: str) -> tuple[JobData, ...]:
        return data_on(self.records.values(), node_id)

    def outcome(self, name: str) -> JobOutcome | None:
        rec = self.records.get(name)
        return None if rec is None else outcome(rec)
