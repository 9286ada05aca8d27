"""Crash-safe file replacement, shared by everything that keeps small state on disk.

Write a temporary file in the same folder, optionally fsync it, ``os.replace`` it over the target, and fsync
the folder: a reader (or a restart after power loss) sees the old file or the new one, never half of one.
Used by the agent's command ledger, the trainer's checkpoint marker, the attention-autotune
cache and the local stack's state file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """Make a rename inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, durable: bool = True, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically; with ``durable``, also survive a power loss.

    Raises ``OSError`` as the operating system reports it; the temporary file is removed on failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)
