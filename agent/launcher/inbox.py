"""The notification socket the launcher gives the agent: systemd's notify protocol, received.

An abstract-namespace datagram socket (no path to clean up, no length limit from a deep directory) with
``SO_PASSCRED``: a datagram counts only when the kernel says it comes from the agent process the launcher
started, as systemd's ``NotifyAccess=main`` does. Anything else, and any datagram too long, is dropped.
"""

from __future__ import annotations

import os
import secrets
import socket
import struct

MAX_DATAGRAM = 4096
_CREDS = struct.Struct("3i")  # struct ucred: pid, uid, gid


class Inbox:
    """Receive ``KEY=value`` lines from one process at a time (``expect``)."""

    def __init__(self) -> None:
        self.name = f"@myolo-launcher-{os.getpid()}-{secrets.token_hex(6)}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind(b"\0" + self.name[1:].encode())
        self.sock.setblocking(False)
        self.pid: int | None = None
        self.dropped = 0

    def expect(self, pid: int | None) -> None:
        self.pid = pid

    def fileno(self) -> int:
        return self.sock.fileno()

    def receive(self) -> list[dict[str, str]]:
        """Every datagram waiting, each as its fields, from the expected process only."""
        out: list[dict[str, str]] = []
        while True:
            try:
                data, ancdata, flags, _ = self.sock.recvmsg(MAX_DATAGRAM, socket.CMSG_SPACE(_CREDS.size))
            except (BlockingIOError, InterruptedError):
                return out
            sender = _sender(ancdata)
            if flags & socket.MSG_TRUNC or sender is None or sender != self.pid:
                self.dropped += 1
                continue
            out.append(parse(data))

    def close(self) -> None:
        self.sock.close()


def parse(data: bytes) -> dict[str, str]:
    """``KEY=value`` per line; lines without ``=`` are ignored, as systemd does."""
    fields: dict[str, str] = {}
    for line in data.decode("utf-8", errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key:
            fields[key] = value
    return fields


def _sender(ancdata: list[tuple[int, int, bytes]]) -> int | None:
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(payload) >= _CREDS.size:
            return _CREDS.unpack_from(payload)[0]
    return None
