"""A tiny float export and token files to mark, for the watermark's tests (CLI and registry)."""

from __future__ import annotations

from pathlib import Path

import torch

from myolo.kernels.export.weights import weights_metadata, write_weights
from myolo.kernels.model import GPT, preset

ARGS = {"n_layers": 2, "max_seq_len": 64}


def tiny_export(path: Path, seed: int = 0, step: int = 7) -> Path:
    """A 2-layer ``tiny`` export (seeded weights) at ``path``."""
    torch.manual_seed(seed)
    write_weights(GPT(preset("tiny", **ARGS)).state_dict(), path, weights_metadata("tiny", step, ARGS))
    return path


def token_file(path: Path, tokens: int, seed: int = 1) -> Path:
    """``tokens`` random byte-level ids as a flat uint16 file."""
    ids = torch.randint(0, 256, (tokens,), generator=torch.Generator().manual_seed(seed)).to(torch.int16)
    path.write_bytes(ids.numpy().tobytes())
    return path
