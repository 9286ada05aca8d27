"""The systemd notify protocol, spoken directly (no libsystemd): one datagram per state change.

With ``Type=notify`` systemd passes ``NOTIFY_SOCKET`` (a filesystem path, or ``@name`` for the abstract
namespace) and, with ``WatchdogSec=``, ``WATCHDOG_USEC`` (and ``WATCHDOG_PID``). The agent sends ``READY=1``
once it is really publishing, ``WATCHDOG=1`` from its main loop (so a loop that is stuck stops petting and
systemd restarts the unit), ``STATUS=...`` lines for ``systemctl status``, and ``STOPPING=1`` on shutdown.
Outside systemd every call is a cheap no-op. The variables are removed from the environment once read so the
subprocesses the agent starts (the bandwidth probe) do not speak for it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import MutableMapping

import structlog

log = structlog.get_logger("myolo.agent.notify")


class Notifier:
    """Send ``KEY=value`` lines to systemd's notification socket."""

    def __init__(self, address: str | None, watchdog_usec: int | None = None) -> None:
        self.address = address
        self.watchdog_usec = watchdog_usec
        self._sock: socket.socket | None = None
        self.sent = 0
        self.errors = 0

    @classmethod
    def from_env(cls, env: MutableMapping[str, str] | None = None, *, unset: bool = True) -> Notifier:
        """Build from ``NOTIFY_SOCKET``/``WATCHDOG_USEC``/``WATCHDOG_PID`` (removing them when ``unset``)."""
        env = os.environ if env is None else env
        address = env.get("NOTIFY_SOCKET") or None
        watchdog = _watchdog_usec(env.get("WATCHDOG_USEC"), env.get("WATCHDOG_PID"))
        if unset:
            for name in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
                env.pop(name, None)
        return cls(address, watchdog)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    @property
    def watchdog_interval_s(self) -> float | None:
        """How often to pet the watchdog: half its timeout, as systemd recommends."""
        return self.watchdog_usec / 2e6 if self.watchdog_usec else None

    def notify(self, **fields: str | int) -> bool:
        """Send ``KEY=value`` pairs (keyword names are upper-cased: ``ready=1`` -> ``READY=1``)."""
        if self.address is None:
            return False
        msg = "\n".join(f"{k.upper()}={_one_line(v)}" for k, v in fields.items()).encode()
        try:
            self._socket().sendto(msg, _sockaddr(self.address))
        except OSError as exc:
            self.errors += 1
            if self.errors <= 3:
                log.warning("sd_notify failed", address=self.address, error=str(exc))
            return False
        self.sent += 1
        return True

    def ready(self, status: str | None = None) -> bool:
        return self.notify(READY=1, **({"STATUS": status} if status else {}))

    def watchdog(self) -> bool:
        return self.notify(WATCHDOG=1)

    def status(self, text: str) -> bool:
        return self.notify(STATUS=text)

    def stopping(self, status: str | None = None) -> bool:
        return self.notify(STOPPING=1, **({"STATUS": status} if status else {}))

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _socket(self) -> socket.socket:
        if self._sock is None:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.setblocking(False)
        return self._sock


def _sockaddr(address: str) -> str | bytes:
    """``@name`` is Linux's abstract namespace: a leading NUL byte instead of a path."""
    if address.startswith("@"):
        return b"\0" + address[1:].encode()
    return address


def _watchdog_usec(usec: str | None, pid: str | None) -> int | None:
    """The watchdog timeout for *this* process, or None (unset, invalid, or meant for another pid)."""
    if not usec:
        return None
    if pid and pid.strip() != str(os.getpid()):
        return None
    try:
        value = int(usec)
    except ValueError:
        log.warning("ignoring WATCHDOG_USEC: not an integer", value=usec)
        return None
    return value if value > 0 else None


def _one_line(value: str | int) -> str:
    return str(value).replace("\n", " ")
