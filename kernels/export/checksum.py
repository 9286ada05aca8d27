"""SHA-256 of a file, read in chunks: weights and token files can be far larger than memory."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable

CHUNK_BYTES = 8 << 20


def sha256_file(path: str | os.PathLike[str], on_chunk: Callable[[], None] | None = None) -> str:
    """Hex digest of the file's bytes; ``on_chunk`` runs after each chunk (a trainer keeps its heartbeat)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            digest.update(chunk)
            if on_chunk is not None:
                on_chunk()
    return digest.hexdigest()
