"""Which worker processes run on which GPU, in a file beside the workers' logs.

Why a file: on simulated GPUs nothing else knows. ``myolo-agent sample`` runs as a process of its own and
reads it, so its simulated GPUs show the daemon's workers as NVML would show real ones. Written atomically;
read tolerantly (a missing or damaged file, or a pid that is gone, means no worker there).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import msgspec

FILE_NAME = "gpus.json"
MAX_BYTES = 1 << 20


def write_gpu_use(workers_dir: Path, use: dict[int, list[int]]) -> None:
    path = workers_dir / FILE_NAME
    tmp = path.with_suffix(".tmp")
    with contextlib.suppress(OSError):
        tmp.write_bytes(msgspec.json.encode({str(gpu): pids for gpu, pids in sorted(use.items())}))
        os.replace(tmp, path)


def read_gpu_use(workers_dir: Path) -> dict[int, list[int]]:
    try:
        with (workers_dir / FILE_NAME).open("rb") as f:
            raw = msgspec.json.decode(f.read(MAX_BYTES), type=dict[str, list[int]])
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return {}
    use: dict[int, list[int]] = {}
    for gpu, pids in raw.items():
        alive = [pid for pid in pids if _alive(pid)]
        if gpu.isdigit() and alive:
            use[int(gpu)] = alive
    return use


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
