"""How long one all-reduce takes across a group, as the slowest rank saw it: the one timing loop of the node
probe (``allreduce.py``) and of a job's own measurement at its first step (``kernels/train/comm.py``)."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist


def timed_allreduce(buf: torch.Tensor, warmup: int, iters: int, group: dist.ProcessGroup | None = None) -> float:
    """Mean seconds of one ``all_reduce(buf)`` over ``group`` after ``warmup`` untimed ones; every rank of the
    group calls it and gets the slowest rank's mean (a collective is as fast as its slowest member)."""
    cuda = buf.device.type == "cuda"
    for _ in range(warmup):
        dist.all_reduce(buf, group=group)
    if cuda:
        torch.cuda.synchronize(buf.device)
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf, group=group)
    if cuda:
        torch.cuda.synchronize(buf.device)
    mean = (time.perf_counter() - start) / iters
    slowest = torch.tensor([mean], dtype=torch.float64, device=buf.device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)
    return float(slowest.item())
