"""The last lines of a worker's log, for its fault event: read from the end, bounded in bytes and lines."""

from __future__ import annotations

import os
from pathlib import Path

MAX_TAIL_BYTES = 64 * 1024
MAX_LINE_CHARS = 1000


def tail_lines(path: Path, lines: int, *, max_bytes: int = MAX_TAIL_BYTES) -> list[str]:
    """Up to ``lines`` last non-empty lines of ``path`` (each cut to 1,000 characters); [] when unreadable."""
    if lines <= 0:
        return []
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - max_bytes))
            data = f.read(max_bytes)
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace")
    kept = [line.rstrip()[:MAX_LINE_CHARS] for line in text.splitlines() if line.strip()]
    if size > max_bytes and kept:
        kept = kept[1:]  # the first line was cut by the byte window
    return kept[-lines:]
