"""The control socket's messages: one JSON object per line each way, over AF_UNIX.

A local socket (not HTTP) because it is reachable only from the node, is guarded by file permissions (0600,
the agent's user), and needs no port. ``myolo-agent inject`` is its client; tests and demos use it too.
"""

from __future__ import annotations

import msgspec


class InjectRequest(
    msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True, tag="inject", tag_field="op"
):
    """Exactly one action per request (the CLI enforces it; the agent checks again)."""

    gpu: int | None = None
    xid: int | None = None
    ecc_dbe: bool = False
    leak_rate: str | None = None
    throttle: str | None = None
    util: float | None = None
    clear: bool = False

    def actions(self) -> list[str]:
        chosen = []
        for name in ("xid", "leak_rate", "throttle", "util"):
            if getattr(self, name) is not None:
                chosen.append(name)
        chosen += [name for name in ("ecc_dbe", "clear") if getattr(self, name)]
        return chosen


class StatusRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, tag="status", tag_field="op"):
    pass


class Reply(msgspec.Struct, kw_only=True, omit_defaults=True):
    ok: bool
    message: str = ""
    error: str | None = None
    data: dict[str, object] = {}


Request = InjectRequest | StatusRequest
MAX_LINE = 64 * 1024
_DECODER = msgspec.json.Decoder(Request)
_ENC = msgspec.json.Encoder()


def decode_request(line: bytes) -> Request:
    """Parse a request line; ``ValueError`` with a readable reason when it is not one."""
    try:
        return _DECODER.decode(line)
    except msgspec.ValidationError as exc:
        raise ValueError(f"bad request: {exc} (ops: 'inject', 'status')") from None
    except msgspec.DecodeError as exc:
        raise ValueError(f"request is not a JSON object: {exc}") from None


def encode(msg: msgspec.Struct) -> bytes:
    return _ENC.encode(msg) + b"\n"


def decode_reply(line: bytes) -> Reply:
    return msgspec.json.decode(line, type=Reply)
