"""Loopback ports for the local stack: pick free ones, and refuse busy ones with a useful message.

A port picked free is only free until someone else binds it: the broker binds its ports seconds later, so its
start tries fresh ports when it loses that race (``LocalBroker.start``)."""

from __future__ import annotations

import contextlib
import errno
import socket

from myolo.coordinator.localstack.broker.errors import BrokerError

HOST = "127.0.0.1"


def _bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # Same option the JVM's server sockets use, so a port in TIME_WAIT after a restart counts as free.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError:
        sock.close()
        raise
    return sock


def free_ports(count: int) -> list[int]:
    """`count` distinct ports the kernel calls free right now (held open together so they differ)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(_bind(0)) for _ in range(count)]
        return [s.getsockname()[1] for s in socks]


class PortInUse(BrokerError):
    """Another process holds `port`: found before the start, or by the broker failing to bind it."""

    def __init__(self, port: int, what: str, option: str, detail: str = "") -> None:
        super().__init__(
            f"{what} {HOST}:{port} is already in use by another process",
            hint=f"stop whatever listens there (see `ss -ltnp 'sport = :{port}'`), or choose another {option}",
            detail=detail,
        )
        self.port = port


def ensure_free(port: int, what: str, option: str) -> None:
    """Raise BrokerError naming `what` (e.g. "Kafka client port") if `port` cannot be bound on loopback
    (PortInUse when another process holds it)."""
    if not 0 < port < 65536:
        raise BrokerError(f"{what} {port} is not a TCP port", hint=f"pass {option} with a value in 1..65535")
    try:
        _bind(port).close()
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise BrokerError(
                f"cannot bind {what} {HOST}:{port}: {exc.strerror}", hint=f"choose another {option}"
            ) from exc
        raise PortInUse(port, what, option) from exc
