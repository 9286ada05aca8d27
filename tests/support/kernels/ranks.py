"""Real gloo ranks for the kernels' tests: the environment of rank ``r`` of ``world`` around a hosted store."""

from __future__ import annotations

import os
from pathlib import Path

from torch.distributed import TCPStore

from kernels.parallel import rendezvous

REPO = Path(__file__).resolve().parents[3]


def rank_env(store: TCPStore, rank: int, world: int, **extra: str) -> dict[str, str]:
    """Our environment, the rendezvous at ``store``, the rank's variables, one thread, the repository on the
    path, then ``extra``."""
    return {
        **os.environ,
        **rendezvous.worker_env(store),
        "RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(rank),
        "PYTHONPATH": str(REPO),
        "OMP_NUM_THREADS": "1",
        **extra,
    }
