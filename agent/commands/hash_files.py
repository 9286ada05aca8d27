"""The ``hash_files`` action: SHA-256 of files on this node, for pre-flight (a job's data against what it recorded).

Each path is streamed through SHA-256 in a worker thread, so the agent's loop keeps sampling and taking
commands while gigabytes are read. What one command may read is bounded by ``max_bytes`` over all its paths:
a file that does not fit in what is left is not read at all (its size says why). Only regular files are read:
a FIFO would block the reader for ever and a device (``/dev/zero``) never ends, so both are refused with the
reason, as is a relative path (the agent's directory is not the workers'). The answer, per path, is
``{"sha256": hex, "size": bytes}`` or ``{"error": why}``; one path's error never fails the others.
"""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from collections.abc import Callable
from typing import Any

import msgspec
import structlog

from myolo.common.digest import Sha256, TooLarge
from myolo.events.payloads.commands import FileDigest, HashFilesArgs, HashFilesResult

log = structlog.get_logger("myolo.agent.commands")
CHUNK_BYTES = 4 << 20


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def hash_one(path: str, budget: int, stop: threading.Event | None = None, chunk: int = CHUNK_BYTES) -> FileDigest:
    """The digest of one regular file of at most ``budget`` bytes (symlinks are followed to their target)."""
    if not os.path.isabs(path):
        return FileDigest(
            error="not an absolute path: the agent's working directory is not the workers'; give it whole"
        )
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return FileDigest(error=f"refused: {_kind(st.st_mode)}, not a regular file; only files are hashed")
        if st.st_size > budget:
            return FileDigest(
                size=st.st_size,
                error=f"not hashed: {st.st_size} bytes, more than the {budget} left of this command's max_bytes",
            )
        # O_NONBLOCK: if the path was swapped for a FIFO since the stat, opening it does not wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return FileDigest(error=f"cannot read it: {exc.strerror or exc}")
    with os.fdopen(fd, "rb", buffering=0) as f:
        opened = os.fstat(f.fileno())
        if not stat.S_ISREG(opened.st_mode):
            return FileDigest(error=f"refused: {_kind(opened.st_mode)}, not a regular file; only files are hashed")
        digest = Sha256(budget)

        def check_stop(_: bytes) -> None:
            if stop is not None and stop.is_set():
                raise _Stopped

        try:
            hashed = digest.read(f, chunk=chunk, each=check_stop)
        except TooLarge:
            return FileDigest(error=f"not hashed: it grew past the {budget} bytes left of max_bytes while read")
        except _Stopped:
            return FileDigest(error=f"stopped after {digest.size} bytes: the command was cancelled")
        except OSError as exc:
            return FileDigest(error=f"read failed after {digest.size} bytes: {exc.strerror or exc}")
    return FileDigest(sha256=hashed.sha256, size=hashed.size)


class _Stopped(Exception):
    """The command was cancelled while a file was read."""


def hash_paths(paths: list[str], max_bytes: int, stop: threading.Event | None = None) -> HashFilesResult:
    """Every path's answer (a path given twice is read once), reading at most ``max_bytes`` in all."""
    out: HashFilesResult = {}
    left = max_bytes
    for path in paths:
        if path in out:
            continue
        found = hash_one(path, left, stop)
        out[path] = found
        if found.sha256 is not None and found.size is not None:
            left -= found.size
    return out


def hash_files_action() -> Callable[..., Any]:
    """The action callable for the executor's table: ``hash_files(HashFilesArgs)``."""

    async def hash_files(args: HashFilesArgs) -> dict[str, Any]:
        stop = threading.Event()
        try:
            found = await asyncio.to_thread(hash_paths, list(args.paths), args.max_bytes, stop)
        except asyncio.CancelledError:
            stop.set()  # the thread stops at its next chunk instead of reading on for nobody
            raise
        log.info(
            "command: files hashed",
            files=len(found),
            errors=sum(1 for d in found.values() if d.error is not None),
            bytes=sum(d.size or 0 for d in found.values() if d.sha256 is not None),
        )
        return {path: msgspec.to_builtins(d) for path, d in found.items()}

    return hash_files
