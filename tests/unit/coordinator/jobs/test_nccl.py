"""What NCCL chose for a job's generation: NCCL logs of four ranks (test data of the agent's parser) through
the agent's tracker, as the fleet keeps the reports, beside the job's own all-reduce and the node's probe;
then as ``myoloctl describe job`` prints it."""

from __future__ import annotations

from pathlib import Path

import msgspec
from rich.console import Console

from myolo.agent.nccl.tracker import NcclTracker
from myolo.coordinator.cli.describe import print_job
from myolo.coordinator.fleet.model import NodeState
from myolo.coordinator.jobs.answers import job_answer
from myolo.coordinator.jobs.manifest import parse_manifest
from myolo.coordinator.jobs.nccl import nccl_view
from myolo.coordinator.jobs.records import Generation, JobProgress, JobRecord, JobSpec, JobStatus, Member
from myolo.events.payloads import BandwidthPoint, BandwidthReport, NcclReport
from tests.support.coordinator.jobs_sim import manifest

LOGS = Path(__file__).parents[2] / "agent" / "nccl" / "test_nccl_logs"


def reports(job: str, generation: int) -> list[NcclReport]:
    tracker = NcclTracker("n-a", job_id=job, generation=generation)
    out = []
    for line in (LOGS / "single_node_4gpu.log").read_text().splitlines():
        out += [p for p in tracker.feed(line, 0.0) if isinstance(p, NcclReport)]
    return out


def job(algo: str = "ring", busbw_gen: int = 2) -> JobRecord:
    spec = parse_manifest(manifest())
    runtime = msgspec.structs.replace(spec.trainer.runtime, nccl_algo=algo)
    spec = msgspec.structs.replace(spec, trainer=msgspec.structs.replace(spec.trainer, runtime=runtime))
    gen = Generation(
        number=2,
        replicas=4,
        workers_per_node=4,
        members=[Member(node_id="n-a", node_rank=0, gpus=[0, 1, 2, 3])],
        master_addr="n-a",
        master_port=29500,
        stage="running",
        created=0.0,
    )
    progress = JobProgress(step=10, allreduce_busbw_gbps=41.5, allreduce_generation=busbw_gen)
    status = JobStatus(updated=0.0, phase="Running", generation=gen, progress=progress)
    return JobRecord(name=spec.name, created=0.0, spec=JobSpec(job=spec), status=status)


def node(with_reports: list[NcclReport]) -> NodeState:
    probe = BandwidthReport(
        node_id="n-a",
        backend="nccl",
        world_size=4,
        points=[
            BandwidthPoint(size_bytes=1 << 20, time_s=1e-4, algbw_gbps=10.0, busbw_gbps=15.0),
            BandwidthPoint(size_bytes=1 << 28, time_s=5e-3, algbw_gbps=50.0, busbw_gbps=75.0),
        ],
    )
    return NodeState(node_id="n-a", nccl=tuple(with_reports), bandwidth=probe)


def test_the_generations_communicator_as_its_ranks_logs_show_it_beside_the_bandwidths() -> None:
    rec = job()
    ours = reports(rec.name, 2)
    older = reports(rec.name, 1)  # the previous generation's: left out
    other = reports("another-job", 2)
    view = nccl_view(rec, {"n-a": node([*older, *other, *ours])}.get)
    assert view is not None
    assert (view.generation, view.algo, view.world_size, view.ranks_reported) == (2, "ring", 4, 4)
    assert view.networks == ["Socket"] and view.coll_channels == [2] and view.versions == ["2.21.5+cuda12.4"]
    assert view.algo_seen == []  # these logs show NCCL choosing on its own
    assert view.transports == sorted({t for r in ours for t in r.transports}) and view.transports
    assert view.rings == ours[0].rings and view.trees == ours[0].trees
    assert view.allreduce_busbw_gbps == 41.5 and view.probe_busbw_gbps == {"n-a": 75.0}  # the largest message's

    stale = nccl_view(job(busbw_gen=1), {"n-a": node(ours)}.get)
    assert stale is not None and stale.allreduce_busbw_gbps is None  # measured by another generation
    none_yet = nccl_view(rec, {"n-a": NodeState(node_id="n-a")}.get)
    assert none_yet is not None and none_yet.ranks_reported == 0 and none_yet.probe_busbw_gbps == {}


def test_describe_job_prints_what_nccl_chose() -> None:
    rec = job()
    view = nccl_view(rec, {"n-a": node(reports(rec.name, 2))}.get)
    console = Console(width=200, record=True)
    print_job(console, job_answer(rec, view))
    text = console.export_text()
    assert "NCCL (generation 2, algorithm ring):" in text
    assert "Reported" in text and "4 of 4 ranks; NCCL 2.21.5+cuda12.4" in text
    assert "Network" in text and "Socket" in text and "none (NCCL chose per call)" in text
    assert "busbw 41.50 GB/s (the job's own, after its first step); nodes' last probes: n-a 75.00" in text
