"""Real gloo ranks for the kernels' tests: the environment of rank ``r`` of ``world`` around a hosted store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from torch.distributed import TCPStore

from myolo.kernels.parallel import rendezvous

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


def run_ranks(args: list[str], world: int = 2, timeout: float = 300, **extra: str) -> list[Any]:
    """``python *args`` as ranks 0..world-1 around one hosted store; each must exit 0. Returns each rank's last
    line of stdout, parsed as JSON, in rank order."""
    store = rendezvous.host_store()
    procs = [
        subprocess.Popen(
            [sys.executable, *args],
            env=rank_env(store, rank, world, **extra),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(world)
    ]
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        assert p.returncode == 0, stderr[-3000:]
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    return outs
