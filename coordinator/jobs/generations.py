"""A generation from a placement, and the commands that start and stop it: pure functions.

The trainer's job of a generation is the manifest's with the layout the placement gives (tp and pp from the
replica, dp from the replica count) and ``resume`` on when the job has a checkpoint directory, so every
generation after the first continues from the newest complete checkpoint, resharded into its layout. The
global batch never changes: each replica's share and its accumulation follow from it.
"""

from __future__ import annotations

import zlib

import msgspec

from myolo.coordinator.jobs.placement import Placement
from myolo.coordinator.jobs.records import Generation, JobRecord, Member
from myolo.events.payloads.commands import StartWorkersArgs, StopWorkersArgs
from myolo.events.payloads.trainer_job import TrainerJob


def master_port(name: str, number: int, lo: int, hi: int) -> int:
    """A port for the generation's rendezvous, different from the previous generation's (whose store may
    still be closing) and spread over jobs by their name."""
    span = hi - lo + 1
    return lo + (zlib.crc32(name.encode()) + number) % span


def new_generation(
    number: int, placement: Placement, master_addr: str, port: int, cause: str, now: float
) -> Generation:
    members = [Member(node_id=node, node_rank=i, gpus=list(gpus)) for i, (node, gpus) in enumerate(placement.nodes)]
    return Generation(
        number=number,
        replicas=placement.replicas,
        workers_per_node=placement.workers_per_node,
        members=members,
        master_addr=master_addr,
        master_port=port,
        created=now,
        cause=cause,
    )


def trainer_job(record: JobRecord, gen: Generation) -> TrainerJob:
    spec = record.spec.job
    job = spec.trainer
    layout = msgspec.structs.replace(job.parallelism, tp=spec.tp, pp=spec.pp, dp=gen.replicas)
    checkpoint = msgspec.structs.replace(job.checkpoint, resume=job.checkpoint.dir is not None or job.checkpoint.resume)
    return msgspec.structs.replace(job, parallelism=layout, checkpoint=checkpoint)


def start_args(record: JobRecord, gen: Generation, member: Member) -> StartWorkersArgs:
    """``start_workers`` arguments for one member (checked again by the commands component and the agent)."""
    return StartWorkersArgs(
        job_id=record.name,
        generation=gen.number,
        node_rank=member.node_rank,
        nnodes=len(gen.members),
        gpus=list(member.gpus),
        master_addr=gen.master_addr,
        master_port=gen.master_port,
        job=trainer_job(record, gen),
    )


def stop_args(record: JobRecord, gen: Generation, checkpoint: bool) -> StopWorkersArgs:
    return StopWorkersArgs(job_id=record.name, generation=gen.number, checkpoint=checkpoint)


def held_gpus(records: list[JobRecord], but: str | None = None) -> dict[str, set[int]]:
    """GPUs the generations of other live jobs hold (current and the one being stopped), per node."""
    held: dict[str, set[int]] = {}
    for rec in records:
        if rec.name == but or rec.terminal:
            continue
        for gen in (rec.status.generation, rec.status.previous):
            if gen is not None and gen.stage != "ended":
                for m in gen.members:
                    held.setdefault(m.node_id, set()).update(m.gpus)
    return held
