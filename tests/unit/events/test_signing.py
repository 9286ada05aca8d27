"""Commands verify only when signed, unmodified, by a key the receiver trusts."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from events.codec import decode, encode
from events.envelope import new_event
from events.errors import ConfigError, SignatureError
from events.examples import example_payloads
from events.signing import SigningKey, Verifier, sign

KEY_A = SigningKey("key-a", b"a" * 32)
KEY_B = SigningKey("key-b", b"b" * 32)


def _wire(event):
    key, value, headers = encode(event)
    return decode(value, headers, key)


def _command():
    return new_event(example_payloads()["ai.myolo.command.v1"], "coordinator/c1")


def test_signed_command_verifies_after_the_wire() -> None:
    Verifier([KEY_A]).verify(_wire(sign(_command(), KEY_A)))


def test_missing_signature_is_rejected() -> None:
    with pytest.raises(SignatureError, match="not signed"):
        Verifier([KEY_A]).verify(_wire(_command()))


def test_forged_payload_is_rejected() -> None:
    key, value, headers = encode(sign(_command(), KEY_A))
    forged = value.replace(b'"epoch":3', b'"epoch":99')
    assert forged != value
    with pytest.raises(SignatureError, match="does not match"):
        Verifier([KEY_A]).verify(decode(forged, headers, key))


def test_forged_envelope_is_rejected() -> None:
    key, value, headers = encode(sign(_command(), KEY_A))
    headers = [(k, b"attacker/x" if k == "ce_source" else v) for k, v in headers]
    with pytest.raises(SignatureError):
        Verifier([KEY_A]).verify(decode(value, headers, key))


def test_replayed_with_another_key_is_rejected() -> None:
    """A command signed with key B, relabelled as key A (or presented as B to an A-only agent), fails."""
    event = sign(_command(), KEY_B)
    with pytest.raises(SignatureError, match="unknown key id"):
        Verifier([KEY_A]).verify(_wire(event))
    relabelled = msgspec.structs.replace(event, extensions={**event.extensions, "sigkeyid": "key-a"})
    with pytest.raises(SignatureError, match="does not match"):
        Verifier([KEY_A]).verify(_wire(relabelled))


def test_key_files(tmp_path: Path) -> None:
    (tmp_path / "hex.key").write_text("ab" * 32 + "\n")
    key = SigningKey.from_file(tmp_path / "hex.key")
    assert key.secret == b"\xab" * 32 and len(key.key_id) == 16
    (tmp_path / "short.key").write_text("abc")
    with pytest.raises(ConfigError, match="use >= 16"):
        SigningKey.from_file(tmp_path / "short.key")
    with pytest.raises(ConfigError, match="cannot read"):
        SigningKey.from_file(tmp_path / "missing.key")
