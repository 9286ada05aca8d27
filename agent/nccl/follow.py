"""Read lines from a log that is still being written, like ``tail -F``, polling on the agent's clock.

Why polling and not inotify: it works on every filesystem (NFS, overlay, bind mounts into containers), costs
one ``fstat`` per poll, and lets tests drive it with a simulated clock. It follows the *name*: when the
file is rotated (renamed and recreated) it finishes the old file and continues with the new one from its
start; when the file is truncated in place (copytruncate) it starts again from the top. A file that does
not exist yet is waited for. Bytes are decoded as UTF-8 with replacement, so binary garbage cannot stop it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import BinaryIO

from myolo.common.clock import Clock

CHUNK = 1 << 20


def _split(buffer: bytearray, max_line: int) -> tuple[list[str], bytearray]:
    """Cut complete lines off ``buffer``; anything longer than ``max_line`` is cut into ``max_line`` pieces, so
    a process printing megabytes without a newline cannot make the agent's buffer grow."""
    lines: list[str] = []
    start = 0
    while True:
        nl = buffer.find(b"\n", start)
        if nl < 0:
            break
        line = buffer[start:nl]
        for cut in range(0, max(len(line), 1), max_line):
            lines.append(line[cut : cut + max_line].decode("utf-8", "replace"))
        start = nl + 1
    rest = buffer[start:]
    while len(rest) > max_line:
        lines.append(rest[:max_line].decode("utf-8", "replace"))
        rest = rest[max_line:]
    return lines, bytearray(rest)


class FileFollower:
    """Follow ``path``; iterate with ``async for line in follower.lines()``.

    ``from_start`` reads what the file already holds on the first open (a trainer's log that began before
    the agent); ``False`` starts at its current end. Counters (``rotations``, ``truncations``) let tests and
    the health endpoint see what happened.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        clock: Clock,
        *,
        poll_s: float = 0.5,
        from_start: bool = True,
        max_line: int = 64 * 1024,
    ) -> None:
        if poll_s <= 0:
            raise ValueError(f"poll_s must be > 0 seconds, got {poll_s}")
        if max_line < 80:
            raise ValueError(f"max_line must be >= 80 bytes, got {max_line}")
        self.path = Path(path)
        self.clock = clock
        self.poll_s = poll_s
        self.from_start = from_start
        self.max_line = max_line
        self.rotations = 0
        self.truncations = 0
        self._fh: BinaryIO | None = None
        self._ino: tuple[int, int] | None = None
        self._buf = bytearray()
        self._opened_once = False

    def _open(self) -> bool:
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - kept open across polls on purpose
        except (FileNotFoundError, PermissionError, IsADirectoryError):
            return False
        st = os.fstat(fh.fileno())
        if not self._opened_once and not self.from_start:
            fh.seek(0, os.SEEK_END)
        self._opened_once = True
        self._fh, self._ino, self._buf = fh, (st.st_dev, st.st_ino), bytearray()
        return True

    def _read_available(self) -> list[str]:
        """Everything readable now, as complete lines (a partial last line waits for its newline)."""
        assert self._fh is not None
        out: list[str] = []
        while True:
            data = self._fh.read(CHUNK)
            if not data:
                return out
            self._buf.extend(data)
            lines, self._buf = _split(self._buf, self.max_line)
            out.extend(lines)
            if len(data) < CHUNK:
                return out

    def _replaced(self) -> bool:
        """True when the name now points at another file (rotation) than the one we hold."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False  # renamed away, the new one not created yet: keep the old handle
        return (st.st_dev, st.st_ino) != self._ino

    def poll(self) -> list[str]:
        """One look at the file: new complete lines, following truncation and rotation."""
        if self._fh is None and not self._open():
            return []
        assert self._fh is not None
        lines = self._read_available()
        if os.fstat(self._fh.fileno()).st_size < self._fh.tell():
            self.truncations += 1
            self._fh.seek(0)
            self._buf = bytearray()
            lines.extend(self._read_available())
        elif self._replaced():
            lines.extend(self._read_available())
            if self._buf:  # the writer moved on: its last unterminated line is complete
                lines.append(self._buf.decode("utf-8", "replace"))
            self.rotations += 1
            self.close()
            if self._open():
                lines.extend(self._read_available())
        return lines

    async def lines(self) -> AsyncIterator[str]:
        """Yield lines forever (until the consumer stops iterating or the task is cancelled)."""
        try:
            while True:
                for line in self.poll():
                    yield line
                await self.clock.sleep(self.poll_s)
        finally:
            self.close()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
        self._fh = None


async def stream_lines(reader: asyncio.StreamReader, max_line: int = 64 * 1024) -> AsyncIterator[str]:
    """Lines of a pipe (a trainer's stderr), with the same garbage tolerance as the file follower."""
    buf = bytearray()
    while True:
        data = await reader.read(CHUNK)
        if not data:
            if buf:
                yield buf.decode("utf-8", "replace")
            return
        buf.extend(data)
        lines, buf = _split(buf, max_line)
        for line in lines:
            yield line
