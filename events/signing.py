"""Signatures on events: commands (coordinator -> agents) and node events that cause action (node -> coordinator).

The signature covers everything that gives an event its meaning: id, source, type, time, subject, Kafka key,
every extension attribute (``traceparent`` included) but the signature's own two, and the payload bytes
exactly as sent. So a relabelled, re-keyed, re-traced or edited record fails. The key id travels in the
``ce_sigkeyid`` header, the signature (hex) in ``ce_sig``. Which algorithm checks it is the verifier's key's
(:mod:`myolo.common.keys`), never the record's say.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from myolo.common.keys import Signer, VerifyKey
from myolo.events.envelope import Event
from myolo.events.errors import SignatureError
from myolo.events.types import COMMAND_ACK_V1, NODE_FAULT_V1, NODE_SAMPLE_V1, TRAINING_COMPLETED_V1, TRAINING_FAULT_V1

SIG = "sig"
SIG_KEY_ID = "sigkeyid"
_ENCODER = msgspec.json.Encoder()
# Node events that make the coordinator act: the agent signs them with its node key when it makes them (before
# the spool), the coordinator verifies them against the node's enrolled public key. Telemetry stays unsigned.
SIGNED_NODE_EVENTS = frozenset({NODE_FAULT_V1, COMMAND_ACK_V1, TRAINING_FAULT_V1, TRAINING_COMPLETED_V1})
# ... and the types signed only when they would make it act (see must_sign); together, what the coordinator checks
GUARDED_NODE_EVENTS = SIGNED_NODE_EVENTS | {NODE_SAMPLE_V1}


def must_sign(event: Event) -> bool:
    """Whether the node signs ``event`` and the coordinator refuses it unsigned: the node events above always,
    and a node sample that reports warn or fail health (the cordon policy acts on a FAIL sample whose fault
    event went missing). A healthy sample is telemetry: shown and weighed, never the cause of an action."""
    if event.type in SIGNED_NODE_EVENTS:
        return True
    return event.type == NODE_SAMPLE_V1 and getattr(event.data, "health", "ok") != "ok"


def signed_message(event: Event, data: bytes) -> bytes:
    """The bytes a signature covers. A JSON array is unambiguous: no value can pose as the next one."""
    ext = sorted((k, v) for k, v in event.extensions.items() if k not in (SIG, SIG_KEY_ID))
    attrs = [event.id, event.source, event.type, event.time or "", event.subject or "", event.key or "", ext]
    return _ENCODER.encode(attrs) + b"\n" + data


def payload_bytes(event: Event) -> bytes:
    return event.raw_data if event.raw_data is not None else _ENCODER.encode(event.data)


def sign(event: Event, signer: Signer) -> Event:
    """The event with ``sigkeyid`` and ``sig`` set (a new value; the input is not modified).

    Sign last: an extension added afterwards (a trace context, say) makes the signature fail."""
    data = _ENCODER.encode(event.data)
    unsigned = {k: v for k, v in event.extensions.items() if k not in (SIG, SIG_KEY_ID)}
    event = msgspec.structs.replace(event, extensions=unsigned, raw_data=data)
    digest = signer.sign_bytes(signed_message(event, data))
    return msgspec.structs.replace(event, extensions={**unsigned, SIG_KEY_ID: signer.key_id, SIG: digest})


def verify_with(event: Event, key: VerifyKey, what: str = "event") -> None:
    """Raise :class:`SignatureError` unless ``key`` made the event's signature."""
    key_id = event.extensions.get(SIG_KEY_ID)
    sig = event.extensions.get(SIG)
    if not key_id or not sig:
        raise SignatureError(f"{what} is not signed", "header ce_sig")
    if key_id != key.key_id:
        raise SignatureError(f"{what} signed with key id {key_id!r}, expected {key.key_id!r}", "header ce_sigkeyid")
    if not key.verify_bytes(signed_message(event, payload_bytes(event)), sig):
        raise SignatureError(f"signature does not match the {what}", "header ce_sig")


class Verifier:
    """Checks signatures against a set of trusted keys (several during a rotation)."""

    def __init__(self, keys: Iterable[VerifyKey], what: str = "command") -> None:
        self._keys = {k.key_id: k for k in keys}
        self._what = what

    def verify(self, event: Event) -> None:
        """Raise :class:`SignatureError` unless the event carries a valid signature by a trusted key."""
        key_id = event.extensions.get(SIG_KEY_ID)
        if not key_id or not event.extensions.get(SIG):
            raise SignatureError(f"{self._what} is not signed", "header ce_sig")
        key = self._keys.get(key_id)
        if key is None:
            raise SignatureError(f"signed with unknown key id {key_id!r}", "header ce_sigkeyid")
        verify_with(event, key, self._what)
