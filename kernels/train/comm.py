"""The job's own all-reduce bandwidth, measured once per generation right after its first step: a buffer
all-reduced over every rank of the job, on the communicator the job trains with (NCCL with the job's
``nccl_algo`` on GPUs, gloo on CPU). ``describe job`` sets it beside the node's last probe, so a job that
gets far less than its links can carry shows it.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from myolo.events.payloads.reports import allreduce_bus_factor
from myolo.kernels.probe.timing import timed_allreduce

BYTES = {"cuda": 64 << 20, "cpu": 4 << 20}  # big enough for the bus to dominate; small beside training
WARMUP, ITERS = 2, 5


def allreduce_busbw_gbps(device: torch.device, group: dist.ProcessGroup | None) -> float | None:
    """Bus bandwidth in GB/s (1e9 bytes/s, as nccl-tests prints) of an all-reduce over ``group``; None for
    a job of one process. Every rank of the group must call it at the same point."""
    if group is None or not dist.is_initialized():
        return None
    n = dist.get_world_size(group)
    if n < 2:
        return None
    nbytes = BYTES.get(device.type, BYTES["cpu"])
    buf = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    seconds = timed_allreduce(buf, WARMUP, ITERS, group)
    return nbytes / seconds / 1e9 * allreduce_bus_factor(n)
