"""Where kernel log bytes come from: a file-like object polled on the agent's clock, or a journal command.

/dev/kmsg is opened non-blocking and polled (a read returns one record, or nothing yet), so stopping never waits
on a blocked read and a simulated clock drives tests over an ordinary file. A read that fails because the ring
buffer overwrote records (``EPIPE``) is counted and reading goes on. The journal is read from a child process
(``journalctl --dmesg --follow``), restarted with a back-off when it exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
from collections.abc import AsyncIterator, Sequence
from typing import BinaryIO

import structlog

from myolo.common.clock import Clock

log = structlog.get_logger("myolo.agent.kernlog")
CHUNK = 8192


def open_kmsg(path: str, from_start: bool = False) -> BinaryIO:
    """``path`` opened for non-blocking reads, at its end unless ``from_start`` (OSError when it cannot be)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    if not from_start:
        with contextlib.suppress(OSError):  # a pipe: nothing to skip
            os.lseek(fd, 0, os.SEEK_END)
    return os.fdopen(fd, "rb", buffering=0)


async def follow(f: BinaryIO, clock: Clock, poll_s: float, *, until_eof: bool = False) -> AsyncIterator[bytes]:
    """Chunks of ``f`` as they come; waits ``poll_s`` when there is nothing (``until_eof``: stops instead)."""
    overrun = 0
    while True:
        try:
            data = f.read(CHUNK)
        except BlockingIOError:
            data = None
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            overrun += 1
            log.warning("kernel log records were overwritten before they were read", times=overrun)
            continue
        if data:
            yield data
            await asyncio.sleep(0)  # a flood of records must not hold the agent's loop: let the others run
            continue
        if until_eof:
            return
        await clock.sleep(poll_s)


async def journal(command: Sequence[str], clock: Clock, backoff_s: float = 5.0) -> AsyncIterator[bytes]:
    """Chunks of ``command``'s standard output, for ever: the command is started again after it exits."""
    while True:
        try:
            proc = await asyncio.create_subprocess_exec(
                *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
            )
        except OSError as exc:
            log.warning("journal command cannot start", command=list(command), error=str(exc))
        else:
            assert proc.stdout is not None
            try:
                while chunk := await proc.stdout.read(CHUNK):
                    yield chunk
            finally:
                if proc.returncode is None:
                    proc.kill()
                await proc.wait()
            log.warning("journal command exited; starting it again", command=list(command), rc=proc.returncode)
        await clock.sleep(backoff_s)
