"""The export manifest a finished job left on this node: ``<export_path>.json``, written by the trainer's
rank 0 (``myolo.kernels.export.manifest``), attached by the agent to the job's ``training.completed`` event.

Why the agent reads it with such care: the file is the trainer's output, on a path the job chose. Whatever is
there (nothing, a FIFO, a huge file, half-written JSON, a schema the agent does not know) must never crash
the agent nor hold up the completion; it is sent without the export, and a warning says why.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

import msgspec
import structlog

from myolo.events.payloads.models import ModelExport

log = structlog.get_logger("myolo.agent.trainer")
MAX_MANIFEST_BYTES = 64 * 1024
SUFFIX = ".json"


def manifest_path(export_path: str, cwd: Path) -> Path:
    """Where the trainer writes the manifest: ``<export_path>.json``, a relative path taken from the workers'
    directory (the one they run in)."""
    path = Path(export_path)
    path = path if path.is_absolute() else cwd / path
    return path.with_name(path.name + SUFFIX)


def _read_bounded(path: Path) -> bytes:
    """At most MAX_MANIFEST_BYTES + 1 bytes of a regular file. Non-blocking open: a FIFO put there would
    otherwise block the agent's event loop until something wrote to it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        chunks, left = [], MAX_MANIFEST_BYTES + 1
        while left > 0 and (chunk := os.read(fd, left)):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


def read_export(path: Path, *, job_id: str, generation: int) -> ModelExport | None:
    """The manifest at ``path`` as a ``ModelExport`` (strict), or None: absent (no warning, as on a node
    without rank 0), unreadable, over 64 KiB or not a valid manifest (a warning with the reason)."""
    try:
        raw = _read_bounded(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        reason = f"cannot read it: {exc}"
    else:
        if len(raw) > MAX_MANIFEST_BYTES:
            reason = f"it is larger than {MAX_MANIFEST_BYTES} bytes"
        else:
            try:
                return msgspec.json.decode(raw, type=ModelExport, strict=True)
            except msgspec.DecodeError as exc:  # ValidationError included
                reason = f"it is not a model export manifest: {exc}"
    log.warning(
        "export manifest ignored; the completion goes out without it",
        job_id=job_id,
        generation=generation,
        path=str(path),
        reason=reason[:500],
    )
    return None
