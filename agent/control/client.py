"""The client side of the control socket (used by ``myolo-agent inject``): plain blocking sockets, no loop."""

from __future__ import annotations

import socket
from pathlib import Path

from myolo.agent.control.protocol import MAX_LINE, Reply, Request, decode_reply, encode


class ControlError(Exception):
    """The agent could not be reached; the message says where we looked and what to do."""


def call(path: str | Path, request: Request, timeout_s: float = 10.0) -> Reply:
    """Send one request and return the agent's reply."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        try:
            sock.connect(str(path))
        except FileNotFoundError:
            raise ControlError(
                f"no agent control socket at {path}: is `myolo-agent run` running on this node? "
                "(pass --socket or --config to point at its control_socket)"
            ) from None
        except PermissionError:
            raise ControlError(f"permission denied on {path}: run as the agent's user (or root)") from None
        except ConnectionRefusedError:
            raise ControlError(f"{path} exists but no agent answers: the agent is not running") from None
        sock.sendall(encode(request))
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = sock.recv(MAX_LINE)
            if not chunk:
                break
            buf += chunk
    except TimeoutError:
        raise ControlError(f"the agent on {path} did not answer within {timeout_s:g}s") from None
    finally:
        sock.close()
    if not buf:
        raise ControlError(f"the agent on {path} closed the connection without answering")
    return decode_reply(buf)
