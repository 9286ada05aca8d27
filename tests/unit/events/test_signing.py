"""Signed events verify only when unmodified, by a key the receiver trusts: payload, envelope, Kafka key and
every extension (``traceparent`` included) are covered; which algorithm checks is the verifier's key's."""

from __future__ import annotations

import msgspec
import pytest

from myolo.common.keys import Ed25519Signer, HmacKey
from myolo.events.codec import decode, encode
from myolo.events.envelope import Event, new_event
from myolo.events.errors import SignatureError
from myolo.events.examples import example_payloads
from myolo.events.signing import SIG, SIG_KEY_ID, Verifier, sign, verify_with

KEY_A = HmacKey("key-a", b"a" * 32)
KEY_B = HmacKey("key-b", b"b" * 32)
ED = Ed25519Signer.generate()
TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _wire(event: Event) -> Event:
    key, value, headers = encode(event)
    return decode(value, headers, key)


def _command(**ext: str) -> Event:
    event = new_event(example_payloads()["ai.myolo.command.v1"], "coordinator/c1", key="node-1")
    return msgspec.structs.replace(event, extensions=ext) if ext else event


def _headers(event: Event, change: dict[str, bytes | None]) -> Event:
    """The signed event through the wire with headers changed (None removes one) or added."""
    key, value, headers = encode(event)
    out = [(k, change[k]) for k, v in headers if k in change and change[k] is not None]
    out += [(k, v) for k, v in headers if k not in change]
    out += [(k, v) for k, v in change.items() if v is not None and k not in dict(headers)]
    return decode(value, out, key)


@pytest.mark.parametrize(("signer", "trusted"), [(KEY_A, KEY_A), (ED, ED.public)], ids=["hmac", "ed25519"])
def test_signed_command_verifies_after_the_wire(signer, trusted) -> None:
    event = _wire(sign(_command(traceparent=TRACE), signer))
    Verifier([trusted]).verify(event)
    verify_with(event, trusted)
    assert len(event.extensions[SIG]) == (64 if isinstance(signer, HmacKey) else 128)  # HMAC-SHA256 / Ed25519


def test_missing_signature_is_rejected() -> None:
    with pytest.raises(SignatureError, match="not signed"):
        Verifier([KEY_A]).verify(_wire(_command()))
    with pytest.raises(SignatureError, match="fault is not signed"):
        verify_with(_wire(_command()), ED.public, "fault")


def test_forged_payload_is_rejected() -> None:
    key, value, headers = encode(sign(_command(), KEY_A))
    forged = value.replace(b'"epoch":3', b'"epoch":99')
    assert forged != value
    with pytest.raises(SignatureError, match="does not match"):
        Verifier([KEY_A]).verify(decode(forged, headers, key))


@pytest.mark.parametrize("header", ["ce_source", "ce_id", "ce_time", "ce_subject"])
def test_forged_envelope_is_rejected(header: str) -> None:
    signed = sign(msgspec.structs.replace(_command(), subject="gpu-0"), ED)
    changed = b"2030-01-01T00:00:00Z" if header == "ce_time" else b"x"
    with pytest.raises(SignatureError):
        Verifier([ED.public]).verify(_headers(signed, {header: changed}))


def test_a_record_moved_to_another_kafka_key_is_rejected() -> None:
    _, value, headers = encode(sign(_command(), ED))
    with pytest.raises(SignatureError, match="does not match"):
        Verifier([ED.public]).verify(decode(value, headers, b"node-2"))


@pytest.mark.parametrize(
    "change",
    [
        {"ce_traceparent": b"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"},  # re-parented
        {"ce_traceparent": None},  # trace context stripped
        {"ce_tracestate": b"vendor=evil"},  # added
        {"ce_partitionkey": b"node-2"},  # any extension added
        {"ce_x": b"1"},
    ],
    ids=["changed traceparent", "removed traceparent", "added tracestate", "added partitionkey", "added extension"],
)
@pytest.mark.parametrize("signer", [KEY_A, ED], ids=["hmac", "ed25519"])
def test_every_extension_is_covered(change: dict[str, bytes | None], signer) -> None:
    signed = sign(_command(traceparent=TRACE), signer)
    Verifier([signer if isinstance(signer, HmacKey) else signer.public]).verify(_headers(signed, {}))
    with pytest.raises(SignatureError, match="does not match"):
        Verifier([signer if isinstance(signer, HmacKey) else signer.public]).verify(_headers(signed, change))


def test_a_traceparent_added_to_an_unsigned_copy_fails() -> None:
    """Sign first, trace afterwards: the trace context is not in what was signed (why the producer signs last)."""
    signed = sign(_command(), ED)
    traced = msgspec.structs.replace(signed, extensions={**signed.extensions, "traceparent": TRACE})
    with pytest.raises(SignatureError, match="does not match"):
        Verifier([ED.public]).verify(_wire(traced))
    Verifier([ED.public]).verify(_wire(sign(traced, ED)))  # signed again after it: fine


def test_replayed_with_another_key_is_rejected() -> None:
    """A command signed with key B, relabelled as key A (or presented as B to an A-only agent), fails."""
    event = sign(_command(), KEY_B)
    with pytest.raises(SignatureError, match="unknown key id"):
        Verifier([KEY_A]).verify(_wire(event))
    relabelled = msgspec.structs.replace(event, extensions={**event.extensions, SIG_KEY_ID: "key-a"})
    with pytest.raises(SignatureError, match="does not match"):
        Verifier([KEY_A]).verify(_wire(relabelled))


def test_the_algorithm_is_the_verifiers_never_the_records() -> None:
    """An HMAC made with the public key's bytes as the secret (what an agent could compute) under the Ed25519
    key's id fails: the verifier holds an Ed25519 public key and checks an Ed25519 signature."""
    public_as_secret = HmacKey(ED.key_id, ED.public.pem().encode())
    with pytest.raises(SignatureError, match="does not match"):
        Verifier([ED.public]).verify(_wire(sign(_command(), public_as_secret)))
    with pytest.raises(SignatureError, match="expected"):
        verify_with(_wire(sign(_command(), Ed25519Signer.generate())), ED.public)


def test_rotation_trusts_every_listed_key() -> None:
    old, new = KEY_A, Ed25519Signer.generate()
    verifier = Verifier([old, new.public])
    verifier.verify(_wire(sign(_command(), old)))
    verifier.verify(_wire(sign(_command(), new)))


@pytest.mark.parametrize("signer", [KEY_A, ED], ids=["hmac", "ed25519"])
def test_a_signature_of_any_text_fails_cleanly(signer) -> None:
    """Whatever ``ce_sig`` holds (not hex, not ASCII), the check says no; it never raises something else."""
    trusted = signer if isinstance(signer, HmacKey) else signer.public
    for junk in ("é" * 64, "zz", "", "0" * 1000):
        event = sign(_command(), signer)
        forged = msgspec.structs.replace(event, extensions={**event.extensions, SIG: junk or "x"})
        with pytest.raises(SignatureError, match="does not match"):
            Verifier([trusted]).verify(_wire(forged))
