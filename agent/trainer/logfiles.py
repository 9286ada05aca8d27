"""The workers' logs on disk, as the agent's HTTP endpoint serves them: which generations and ranks of a job
have logs here, and a chunk of one log.

Paths come from ``launch.run_dir`` and ``launch.rank_log`` only; a directory entry counts only when those
functions give back exactly its path, so a stray file (``rank-01.log``, ``g1.old``) is never taken for a log.
Run directories and logs are taken only when they are not symlinks, and logs must be regular files: a
worker's run directory is its working directory, and what it puts there must not make the endpoint read
anything else.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from myolo.agent.trainer.launch import rank_log, run_dir

_GENERATION = re.compile(r"g([0-9]{1,9})")
_RANK = re.compile(r"rank-([0-9]{1,9})\.log")


@dataclass(frozen=True)
class Chunk:
    data: bytes
    size: int  # of the whole file when it was read


def generations(workers_dir: Path, job_id: str) -> list[int]:
    """The job's generations with a run directory here, oldest first."""
    found = []
    for entry in _entries(run_dir(workers_dir, job_id, 0).parent):
        m = _GENERATION.fullmatch(entry.name)
        if m and run_dir(workers_dir, job_id, int(m[1])) == entry and is_real_dir(entry):
            found.append(int(m[1]))
    return sorted(found)


def is_real_dir(path: Path) -> bool:
    """A directory, not a symlink to one (a worker could plant that next to its own run directory)."""
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def rank_logs(directory: Path) -> dict[int, Path]:
    """The ranks with a log in a run directory, by rank."""
    found = {}
    for entry in _entries(directory):
        m = _RANK.fullmatch(entry.name)
        if m and rank_log(directory, int(m[1])) == entry:
            found[int(m[1])] = entry
    return dict(sorted(found.items()))


def log_size(path: Path) -> int | None:
    """The log's size, None when it is not a regular file (gone, or replaced by something else)."""
    try:
        st = path.lstat()
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def read_chunk(path: Path, offset: int, limit: int) -> Chunk:
    """Up to ``limit`` bytes from ``offset``. Raises ``OSError`` when the log cannot be read as a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path.name} is not a regular file")
        data = os.pread(fd, limit, offset) if offset < st.st_size else b""
        return Chunk(data=data, size=max(st.st_size, offset + len(data)))
    finally:
        os.close(fd)


def decode(data: bytes, *, final: bool) -> tuple[str, int]:
    """The text of ``data`` and how many of its bytes it covers. A character cut at the end of a chunk is left
    for the next one unless ``final`` (or unless it is all there is, so a reader always moves on)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = decoder.decode(data, final=final)
    pending = len(decoder.getstate()[0])
    if pending and pending == len(data):
        return decoder.decode(b"", final=True), len(data)
    return text, len(data) - pending


def _entries(directory: Path) -> list[Path]:
    try:
        return list(directory.iterdir())
    except OSError:
        return []
