"""HMAC-SHA256 signatures on commands, so an agent only obeys the coordinator holding the key.

The signature covers the envelope attributes that give a command its meaning (id, source, type, time,
subject, key) and the payload bytes exactly as sent. The key id travels in the ``ce_sigkeyid`` header, the
signature (hex) in ``ce_sig``. Keys live in files; several may be loaded at once so keys can be rotated.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path

import msgspec

from events.envelope import Event
from events.errors import ConfigError, SignatureError

_ENCODER = msgspec.json.Encoder()
MIN_KEY_BYTES = 16


@dataclass(frozen=True)
class SigningKey:
    key_id: str
    secret: bytes

    @classmethod
    def from_file(cls, path: str | Path, key_id: str | None = None) -> SigningKey:
        """Read a key file (the secret, hex or raw bytes). The key id defaults to a digest of the secret."""
        p = Path(path)
        try:
            raw = p.read_bytes().strip()
        except OSError as exc:
            raise ConfigError("signing.key_file", f"cannot read {str(p)!r}: {exc.strerror}") from None
        try:
            secret = bytes.fromhex(raw.decode())
        except ValueError:
            secret = raw
        if len(secret) < MIN_KEY_BYTES:
            raise ConfigError("signing.key_file", f"key in {str(p)!r} is {len(secret)} bytes; use >= {MIN_KEY_BYTES}")
        return cls(key_id or hashlib.sha256(secret).hexdigest()[:16], secret)


def _message(event: Event, data: bytes) -> bytes:
    attrs = [event.id, event.source, event.type, event.time or "", event.subject or "", event.key or ""]
    return "\n".join(attrs).encode() + b"\n" + data


def sign(event: Event, key: SigningKey) -> Event:
    """Attach ``sigkeyid`` and ``sig`` extensions to the event (returned, the input is not modified)."""
    data = _ENCODER.encode(event.data)
    digest = hmac.new(key.secret, _message(event, data), hashlib.sha256).hexdigest()
    ext = {**event.extensions, "sigkeyid": key.key_id, "sig": digest}
    return msgspec.structs.replace(event, extensions=ext, raw_data=data)


class Verifier:
    """Checks signatures against the keys an agent trusts."""

    def __init__(self, keys: list[SigningKey]) -> None:
        self._keys = {k.key_id: k for k in keys}

    def verify(self, event: Event) -> None:
        """Raise :class:`SignatureError` unless the event carries a valid signature by a trusted key."""
        key_id = event.extensions.get("sigkeyid")
        sig = event.extensions.get("sig")
        if not key_id or not sig:
            raise SignatureError("command is not signed", "header ce_sig")
        key = self._keys.get(key_id)
        if key is None:
            raise SignatureError(f"signed with unknown key id {key_id!r}", "header ce_sigkeyid")
        data = event.raw_data if event.raw_data is not None else _ENCODER.encode(event.data)
        expected = hmac.new(key.secret, _message(event, data), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, sig):
            raise SignatureError("signature does not match the command", "header ce_sig")
