"""Whether a calibration set and an evaluation set share tokens: they must not, or the evaluation flatters.

Every run of ``WINDOW`` consecutive tokens of the calibration stream is hashed, and the evaluation stream's
runs are looked up among them. A held-out set cut from the calibration data (or the same file) shares nearly
all its runs; two parts of one corpus share few (text repeats itself: licence headers, indentation, common
lines), so a share over ``MAX_SHARED`` of the evaluation's runs is refused and a smaller one is only reported.
Streams are the tokens as they lie in their file (the calibration and held-out readers take consecutive
windows from the start), so a run is found wherever the two readers cut their rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch

WINDOW = 32
MAX_SHARED = 0.01
_DTYPES = {"uint16": np.uint16, "uint32": np.uint32}


def file_prefix(path: str | os.PathLike[str], tokens: int, dtype: str = "uint16") -> torch.Tensor:
    """The first ``tokens`` ids of a token file (fewer when it is shorter), as int64."""
    width = np.dtype(_DTYPES[dtype]).itemsize
    with open(Path(path), "rb") as f:
        raw = f.read(tokens * width)
    return torch.from_numpy(np.frombuffer(raw[: len(raw) - len(raw) % width], dtype=_DTYPES[dtype]).astype(np.int64))


def _runs(stream: torch.Tensor, window: int) -> Iterable[bytes]:
    raw = stream.reshape(-1).to(torch.int64).numpy().tobytes()
    step = 8 * window
    return (raw[i : i + step] for i in range(0, len(raw) - step + 8, 8))


def shared_runs(
    calib: Iterable[torch.Tensor], held_out: Iterable[torch.Tensor], window: int = WINDOW
) -> tuple[int, int]:
    """(runs of ``held_out``'s streams also in ``calib``'s, runs of ``held_out`` in all)."""
    seen = {hash(r) for stream in calib for r in _runs(stream, window)}
    hits = total = 0
    for stream in held_out:
        for r in _runs(stream, window):
            total += 1
            hits += hash(r) in seen
    return hits, total
