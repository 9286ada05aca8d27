"""The agent side of the control socket: an asyncio Unix server answering one request per line."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

import structlog

from myolo.agent.control.protocol import MAX_LINE, Reply, Request, decode_request, encode

log = structlog.get_logger("myolo.agent.control")
Handler = Callable[[Request], Reply]


class ControlServer:
    """Listens on ``path`` (mode 0600). A stale socket file left by a crashed agent is replaced; a live one
    (another agent answering) is an error rather than silently stolen."""

    def __init__(self, path: str | Path, handler: Handler) -> None:
        self.path = Path(path)
        self._handler = handler
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() or self.path.is_symlink():
            if not stat.S_ISSOCK(self.path.lstat().st_mode):
                raise OSError(
                    f"control socket path {self.path} exists and is not a socket; remove it or set control_socket"
                )
            if await _answers(self.path):
                raise OSError(f"another agent is already listening on {self.path}; stop it or set control_socket")
            self.path.unlink()
        old = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=str(self.path), limit=MAX_LINE)
        finally:
            os.umask(old)
        log.info("control socket listening", path=str(self.path))

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                writer.write(encode(self._answer(line)))
                await writer.drain()
        except (ConnectionError, asyncio.LimitOverrunError, ValueError) as exc:
            log.debug("control client went away", error=repr(exc))
        finally:
            writer.close()

    def _answer(self, line: bytes) -> Reply:
        try:
            request = decode_request(line)
        except ValueError as exc:
            return Reply(ok=False, error=str(exc))
        try:
            return self._handler(request)
        except ValueError as exc:  # validation errors from the backend name the option at fault
            return Reply(ok=False, error=str(exc))
        except Exception as exc:
            log.exception("control request failed")
            return Reply(ok=False, error=f"internal error: {exc!r}")


async def _answers(path: Path) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(path)), 1.0)
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True
