"""Diagnostic reports from the agent: NCCL communicators, bus bandwidth, memory-leak trends."""

from __future__ import annotations

from typing import Literal

from myolo.events.payloads.common import Id, NonNegFloat, NonNegInt, Payload


class NcclChannel(Payload, kw_only=True):
    channel: NonNegInt
    src: str
    dst: str
    transport: str  # P2P, SHM, NET/IB, NET/Socket, ... with GDRDMA when used
    direction: Literal["send", "receive", "both"] = "both"


class NcclReport(Payload, kw_only=True):
    """``ai.myolo.nccl.report.v1``: what a communicator looks like once it has come up."""

    node_id: Id
    pid: NonNegInt
    rank: NonNegInt | None = None
    nranks: NonNegInt | None = None
    nnodes: NonNegInt | None = None
    local_rank: NonNegInt | None = None
    cuda_dev: NonNegInt | None = None
    comm_id: str | None = None
    version: str | None = None
    network: str | None = None
    algo: str | None = None  # "Ring", "Tree", "Ring,Tree": NCCL_ALGO as NCCL read it (None: NCCL's own choice)
    net_devices: list[str] = []
    transports: list[str] = []
    channels: list[NcclChannel] = []
    rings: list[str] = []
    trees: list[str] = []
    coll_channels: NonNegInt | None = None
    p2p_channels: NonNegInt | None = None
    init_complete: bool = False
    warnings: list[str] = []
    job_id: str | None = None
    generation: NonNegInt | None = None  # of job_id, when the agent started the process (its log's folder says)


def allreduce_bus_factor(n: int) -> float:
    """nccl-tests' all-reduce factor: each byte crosses 2(n-1)/n links' worth of bandwidth (busbw = algbw x it)."""
    return 2.0 * (n - 1) / n


class BandwidthPoint(Payload, kw_only=True):
    size_bytes: NonNegInt
    time_s: NonNegFloat
    algbw_gbps: NonNegFloat
    busbw_gbps: NonNegFloat


class BandwidthReport(Payload, kw_only=True):
    """``ai.myolo.nccl.bandwidth.v1``: an all-reduce sweep; busbw = algbw x 2(n-1)/n."""

    node_id: Id
    backend: Literal["gloo", "nccl"]
    world_size: NonNegInt
    collective: str = "all_reduce"
    points: list[BandwidthPoint]
    command_id: str | None = None


class LeakReport(Payload, kw_only=True):
    """``ai.myolo.memory.leak.v1``: robust growth estimate of one memory series, in % of capacity per hour.

    ``subject`` says what was tracked: ``gpu`` (a GPU's used memory), ``process_gpu`` (one process's memory on
    a GPU) or ``host_rss`` (a trainer's resident host memory)."""

    node_id: Id
    subject: Literal["gpu", "process_gpu", "host_rss"]
    gpu_index: NonNegInt | None = None
    pid: NonNegInt | None = None
    slope_pct_per_h: float
    lower_pct_per_h: float
    upper_pct_per_h: float
    confidence: float = 0.95
    window_s: NonNegFloat
    samples: NonNegInt
    threshold_pct_per_h: NonNegFloat = 0.1
    alert: bool = False
    method: str = "theil-sen"
