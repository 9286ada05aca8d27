"""Resident host memory of the trainer processes (psutil), for the host-RSS leak series."""

from __future__ import annotations

from collections.abc import Iterable

import psutil


def read_rss(pids: Iterable[int]) -> dict[int, int]:
    """pid -> RSS bytes for the processes still alive; a process that vanished or is not ours is skipped."""
    out: dict[int, int] = {}
    for pid in pids:
        try:
            out[pid] = psutil.Process(pid).memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return out


def host_total_bytes() -> int:
    return int(psutil.virtual_memory().total)
