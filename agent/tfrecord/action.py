"""The ``check_tfrecords`` action: expand each path or pattern on the node and check every file it matches.

As with ``hash_files``: files are read in a worker thread (the agent's loop keeps sampling), only regular files
with absolute paths are read, ``max_bytes`` bounds what one command reads over all its files (a file that does
not fit in what is left is reported, not read), and one file's error never fails the others.
"""

from __future__ import annotations

import asyncio
import glob
import itertools
import os
import stat
import threading
from collections.abc import Callable
from typing import Any

import msgspec
import structlog

from myolo.agent.commands.hash_files import _kind as file_kind
from myolo.agent.tfrecord.check import Stopped, check_stream
from myolo.events.payloads.commands import CheckTfrecordsArgs, CheckTfrecordsResult, TfRecordFile, TfRecordPattern

log = structlog.get_logger("myolo.agent.commands")


def expand(pattern: str, max_files: int) -> TfRecordPattern:
    """The files ``pattern`` names (itself when it has no wildcard), sorted, at most ``max_files``."""
    if not os.path.isabs(pattern):
        return TfRecordPattern(error="not an absolute path: the agent's working directory is not the workers'")
    if not glob.has_magic(pattern):
        return TfRecordPattern(files=[TfRecordFile(path=pattern)])
    names = sorted(itertools.islice(glob.iglob(pattern), max_files + 1))
    if not names:
        return TfRecordPattern(error="no file matches it on this node")
    return TfRecordPattern(files=[TfRecordFile(path=n) for n in names[:max_files]], truncated=len(names) > max_files)


def check_one(path: str, budget: int, stop: threading.Event | None = None) -> TfRecordFile:
    """One regular file of at most ``budget`` bytes checked (symlinks are followed)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return TfRecordFile(path=path, error=f"refused: {file_kind(st.st_mode)}, not a regular file")
        if st.st_size > budget:
            return TfRecordFile(
                path=path,
                size=st.st_size,
                error=f"not checked: {st.st_size} bytes, more than the {budget} left of this command's max_bytes",
            )
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return TfRecordFile(path=path, error=f"cannot read it: {exc.strerror or exc}")
    with os.fdopen(fd, "rb") as f:
        opened = os.fstat(f.fileno())
        if not stat.S_ISREG(opened.st_mode):
            return TfRecordFile(path=path, error=f"refused: {file_kind(opened.st_mode)}, not a regular file")
        try:
            return check_stream(f, path, opened.st_size, stop)
        except OSError as exc:
            return TfRecordFile(path=path, size=opened.st_size, error=f"read failed: {exc.strerror or exc}")


def check_paths(
    patterns: list[str], max_bytes: int, max_files: int, stop: threading.Event | None = None
) -> CheckTfrecordsResult:
    """Every pattern's files checked, reading at most ``max_bytes`` in all (a file matched twice is read once)."""
    out: CheckTfrecordsResult = {}
    done: dict[str, TfRecordFile] = {}
    left = max_bytes
    for pattern in patterns:
        if pattern in out:
            continue
        found = expand(pattern, max_files)
        for i, f in enumerate(found.files):
            if f.path not in done:
                try:
                    done[f.path] = check_one(f.path, left, stop)
                except Stopped:
                    done[f.path] = TfRecordFile(path=f.path, error="stopped: the command was cancelled")
                if done[f.path].error is None or done[f.path].bad_offset is not None:
                    left -= done[f.path].size
            found.files[i] = done[f.path]
        out[pattern] = found
    return out


def check_tfrecords_action() -> Callable[..., Any]:
    """The action callable for the executor's table: ``check_tfrecords(CheckTfrecordsArgs)``."""

    async def check_tfrecords(args: CheckTfrecordsArgs) -> dict[str, Any]:
        stop = threading.Event()
        try:
            found = await asyncio.to_thread(check_paths, list(args.paths), args.max_bytes, args.max_files, stop)
        except asyncio.CancelledError:
            stop.set()
            raise
        files = [f for p in found.values() for f in p.files]
        log.info(
            "command: TFRecord files checked",
            files=len(files),
            bad=sum(1 for f in files if f.bad_offset is not None),
            errors=sum(1 for f in files if f.error is not None and f.bad_offset is None),
            records=sum(f.records for f in files),
        )
        return {p: msgspec.to_builtins(r) for p, r in found.items()}

    return check_tfrecords
