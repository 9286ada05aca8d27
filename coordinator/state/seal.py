"""Seals on state records: an HMAC by the coordinators, checked on replay, so a record nobody of us wrote is
never acted on.

Anyone who may write to a state topic (a mistake in the ACLs, a leaked client password) could otherwise plant a
pending command intent the next leader sends with a valid signature, a leader term that deposes the leader, or
a tombstone that lifts a cordon. The key is derived from the coordinators' signing key (``derive_hmac``, purpose
:data:`PURPOSE`): every coordinator holds that key, the agents (public key only) cannot compute it, and an HMAC
costs microseconds on a replay of every record. The seal covers the topic, the Kafka key, the kind and the value
(a tombstone's absent value included), so a record cannot be moved to another key or topic, relabelled, or
turned into a deletion. Header: ``myolo-state-sig: <key id>:<hex>``.

During a rotation the keys derived from ``[signing] previous_key_files`` are accepted too; records sealed with
one of them are remembered so the leader can seal them again with the current key (:meth:`StateTail.stale`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import msgspec

from myolo.common.keys import Ed25519Signer, HmacKey, derive_hmac
from myolo.coordinator.state.codec import BadStateRecord

PURPOSE = "myolo state records v1"
SEAL_HEADER = "myolo-state-sig"
_ENC = msgspec.json.Encoder()
Headers = Sequence[tuple[str, bytes]] | None
# records sealed with a previous key: (topic, key) -> (kind, value), to be sealed again by a leader
Stale = dict[tuple[str, bytes], tuple[str, bytes | None]]


class ForgedStateRecord(BadStateRecord):
    """A state record without a valid seal of ours: skipped, counted as forged, never applied."""


def sealed_message(topic: str, key: bytes, kind: str, value: bytes | None) -> bytes:
    """What a seal covers. A JSON array (the key in hex) then the value: no field can pose as another, and a
    tombstone (``value`` None) differs from an empty value."""
    return _ENC.encode([topic, key.hex(), kind, value is None]) + b"\n" + (value or b"")


def _header(headers: Headers) -> bytes | None:
    found = [v for k, v in headers or () if k == SEAL_HEADER]
    if len(found) > 1:
        raise ForgedStateRecord(f"{len(found)} {SEAL_HEADER} headers")
    return bytes(found[0]) if found and isinstance(found[0], bytes | bytearray) else None


@dataclass(frozen=True)
class StateKeys:
    """The key state records are sealed with, and the earlier ones still accepted during a rotation."""

    current: HmacKey
    previous: tuple[HmacKey, ...] = ()

    @classmethod
    def derive(cls, signer: Ed25519Signer | HmacKey, previous: Iterable[Ed25519Signer | HmacKey] = ()) -> StateKeys:
        return cls(derive_hmac(signer, PURPOSE), tuple(derive_hmac(p, PURPOSE) for p in previous))

    def seal(self, topic: str, key: bytes, kind: str, value: bytes | None) -> tuple[str, bytes]:
        mac = self.current.sign_bytes(sealed_message(topic, key, kind, value))
        return SEAL_HEADER, f"{self.current.key_id}:{mac}".encode()

    def check(self, topic: str, key: bytes, kind: str, value: bytes | None, headers: Headers) -> bool:
        """True when sealed with the current key, False with a previous one; :class:`ForgedStateRecord` when
        the seal is missing, by a key we do not hold, or does not match."""
        raw = _header(headers)
        if raw is None:
            raise ForgedStateRecord(f"not sealed (no {SEAL_HEADER} header)")
        key_id, _, mac = raw.decode(errors="replace").rpartition(":")
        if not mac.isascii():
            raise ForgedStateRecord("seal is not hex")
        keys = {k.key_id: k for k in (*self.previous, self.current)}
        found = keys.get(key_id)
        if found is None:
            raise ForgedStateRecord(f"sealed with key id {key_id[:80]!r}, not one of ours")
        if not found.verify_bytes(sealed_message(topic, key, kind, value), mac):
            raise ForgedStateRecord("seal does not match the record")
        return found is self.current
