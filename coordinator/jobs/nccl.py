"""What NCCL chose for a job's running generation, from the reports of its workers' NCCL logs that the fleet
keeps per node (``NcclReport``: rings, trees, channels, transports, the network), beside the job's own
all-reduce bandwidth (measured after the generation's first step) and each node's last probe.

Only the job's world communicator counts (the one of every rank: ``nranks`` = the world size); the rings and
trees shown are the lowest rank's, as NCCL prints the same graph on every rank of a communicator.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from myolo.coordinator.fleet.interface import NodeState
from myolo.coordinator.jobs.records import JobRecord
from myolo.events.payloads import NcclReport

MAX_SHOWN = 16  # rings or trees listed; a big world has one per channel


class NcclView(msgspec.Struct, kw_only=True, frozen=True):
    generation: int
    algo: str  # spec.trainer.ncclAlgo: auto (NCCL's choice per call), ring or tree
    algo_seen: list[str] = []  # NCCL_ALGO as the ranks' NCCL read it (empty: NCCL chose on its own)
    world_size: int
    ranks_reported: int  # ranks whose NCCL log showed the world communicator come up
    versions: list[str] = []
    networks: list[str] = []  # "IB", "Socket"
    transports: list[str] = []  # "P2P", "SHM", "NET/IB", "NET/Socket", ...
    coll_channels: list[int] = []  # distinct collective channel counts over the ranks
    rings: list[str] = []
    trees: list[str] = []
    warnings: list[str] = []
    allreduce_busbw_gbps: float | None = None  # the job's own, this generation
    probe_busbw_gbps: dict[str, float] = {}  # each member node's last probe, at its largest message


def nccl_view(rec: JobRecord, node: Callable[[str], NodeState | None]) -> NcclView | None:
    gen = rec.status.generation
    if gen is None:
        return None
    world = gen.world_size
    reports: list[NcclReport] = []
    probes: dict[str, float] = {}
    for member in gen.members:
        state = node(member.node_id)
        if state is None:
            continue
        reports += [r for r in state.nccl if r.job_id == rec.name and r.generation == gen.number and r.nranks == world]
        if state.bandwidth is not None and state.bandwidth.points:
            probes[member.node_id] = max(state.bandwidth.points, key=lambda p: p.size_bytes).busbw_gbps
    first = min(reports, key=lambda r: r.rank if r.rank is not None else world, default=None)
    progress = rec.status.progress
    measured = progress.allreduce_busbw_gbps if progress.allreduce_generation == gen.number else None
    return NcclView(
        generation=gen.number,
        algo=rec.spec.job.trainer.runtime.nccl_algo,
        world_size=world,
        ranks_reported=len({r.rank for r in reports if r.rank is not None}),
        algo_seen=sorted({r.algo for r in reports if r.algo}),
        versions=sorted({r.version for r in reports if r.version}),
        networks=sorted({r.network for r in reports if r.network}),
        transports=sorted({t for r in reports for t in r.transports}),
        coll_channels=sorted({r.coll_channels for r in reports if r.coll_channels is not None}),
        rings=list(first.rings[:MAX_SHOWN]) if first else [],
        trees=list(first.trees[:MAX_SHOWN]) if first else [],
        warnings=sorted({w for r in reports for w in r.warnings})[:MAX_SHOWN],
        allreduce_busbw_gbps=measured,
        probe_busbw_gbps=probes,
    )
