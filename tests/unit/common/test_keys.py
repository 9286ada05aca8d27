"""Key files: each kind loads, a secret others can read is refused naming chmod 600 (as ssh refuses it), and
nothing that is not one of our keys passes for one (an oversized file, another PEM, an RSA key, a public key
where a private one is needed)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from myolo.common.errors import ConfigError
from myolo.common.keys import (
    MAX_KEY_FILE_BYTES,
    Ed25519Public,
    Ed25519Signer,
    HmacKey,
    derive_hmac,
    ensure_ed25519,
    load_secret,
    load_signer,
    load_verify_key,
    public_key_from_pem,
    watermark_commitment,
    write_secret,
)
from tests.support.helpers import new_ed25519_key, write_key


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_an_ed25519_private_key_signs_and_its_public_file_verifies(tmp_path: Path) -> None:
    made = new_ed25519_key(tmp_path / "c.key")
    signer = load_signer(tmp_path / "c.key")
    assert isinstance(signer, Ed25519Signer) and signer.key_id == made.key_id
    public = load_verify_key(tmp_path / "c.key.pub", "commands.key_files[0]")
    assert isinstance(public, Ed25519Public) and public.key_id == signer.key_id
    sig = signer.sign_bytes(b"message")
    assert public.verify_bytes(b"message", sig) and not public.verify_bytes(b"messagf", sig)
    assert not public.verify_bytes(b"message", "zz")  # not hex: a failed check, not an exception
    # a verifier given the private file uses its public half (a coordinator verifying with its own key)
    assert isinstance(load_verify_key(tmp_path / "c.key", "k"), Ed25519Public)
    assert public_key_from_pem(public.pem(), "pem").key_id == signer.key_id


@pytest.mark.parametrize("text", ["ab" * 32, "ab" * 32 + "\n", "a raw secret of enough bytes"])
def test_an_hmac_secret_loads_as_hex_or_raw_bytes(tmp_path: Path, text: str) -> None:
    key = load_signer(write_key(tmp_path / "s.key", text))
    assert isinstance(key, HmacKey) and len(key.key_id) == 16
    assert key.secret == (b"\xab" * 32 if text.startswith("abab") else text.encode())
    assert load_verify_key(tmp_path / "s.key", "k") == key  # both sides hold the same secret


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
@pytest.mark.parametrize("kind", ["ed25519", "hmac"])
def test_a_key_others_can_read_is_refused_naming_chmod_600(tmp_path: Path, mode: int, kind: str) -> None:
    path = tmp_path / "k.key"
    new_ed25519_key(path) if kind == "ed25519" else write_key(path)
    path.chmod(mode)
    for load in (lambda: load_signer(path), lambda: load_verify_key(path, "commands.key_files[0]")):
        with pytest.raises(ConfigError, match=rf"accessible by others \(mode 0{mode:o}\).*chmod 600 {path}"):
            load()


def test_a_public_key_file_may_be_read_by_anyone_but_cannot_sign(tmp_path: Path) -> None:
    new_ed25519_key(tmp_path / "c.key")
    public = tmp_path / "c.key.pub"
    public.chmod(0o644)
    assert isinstance(load_verify_key(public, "k"), Ed25519Public)
    for mode in (0o644, 0o600):
        public.chmod(mode)
        with pytest.raises(ConfigError, match="is a public key, which cannot sign"):
            load_signer(public)


def test_missing_short_and_oversized_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_signer(tmp_path / "missing.key")
    with pytest.raises(ConfigError, match="use >= 16"):
        load_signer(write_key(tmp_path / "short.key", "abc"))
    with pytest.raises(ConfigError, match=f"larger than {MAX_KEY_FILE_BYTES} bytes"):
        load_signer(write_key(tmp_path / "big.key", "a" * (MAX_KEY_FILE_BYTES + 1)))
    with pytest.raises(ConfigError, match=f"larger than {MAX_KEY_FILE_BYTES} bytes"):
        public_key_from_pem("a" * (MAX_KEY_FILE_BYTES + 1), "pem")
    (tmp_path / "dir.key").mkdir()
    with pytest.raises(ConfigError, match="not a regular file"):
        load_signer(tmp_path / "dir.key")


def _pem(kind: str) -> bytes:
    enc, none = serialization.Encoding.PEM, serialization.NoEncryption()
    rsa_key = rsa.generate_private_key(65537, 2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    return {
        "rsa pkcs8": rsa_key.private_bytes(enc, serialization.PrivateFormat.PKCS8, none),
        "rsa traditional": rsa_key.private_bytes(enc, serialization.PrivateFormat.TraditionalOpenSSL, none),
        "openssh": ec_key.private_bytes(enc, serialization.PrivateFormat.OpenSSH, none),
        "certificate": b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        "damaged": b"-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n",
    }[kind]


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("rsa pkcs8", "holds a RSAPrivateKey; only Ed25519"),
        ("rsa traditional", "holds a PEM 'RSA PRIVATE KEY', which is neither"),
        ("openssh", "holds a PEM 'OPENSSH PRIVATE KEY', which is neither"),
        ("certificate", "holds a PEM 'CERTIFICATE', which is neither"),
        ("damaged", "is not an unencrypted PEM private key"),
    ],
)
def test_keys_of_another_kind_are_refused_not_taken_for_secrets(tmp_path: Path, kind: str, words: str) -> None:
    path = tmp_path / "other.key"
    path.write_bytes(_pem(kind))
    path.chmod(0o600)
    for load in (lambda: load_signer(path, "signing.key_file"), lambda: load_verify_key(path, "signing.key_file")):
        with pytest.raises(ConfigError, match=rf"signing\.key_file: .*{words}"):
            load()


def test_other_public_keys_are_refused(tmp_path: Path) -> None:
    pem = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    (tmp_path / "ec.pub").write_bytes(pem)
    with pytest.raises(ConfigError, match="only Ed25519"):
        load_verify_key(tmp_path / "ec.pub", "k")
    with pytest.raises(ConfigError, match="not a PEM public key"):
        public_key_from_pem("-----BEGIN PUBLIC KEY-----\nxx\n-----END PUBLIC KEY-----", "pem")


def test_ensure_ed25519_creates_a_private_key_and_its_public_half_then_reuses_them(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "node.key"
    first = ensure_ed25519(path, "identity.key_file")
    assert _mode(path) == 0o600 and path.with_name("node.key.pub").exists()
    assert load_verify_key(path.with_name("node.key.pub"), "k").key_id == first.key_id
    before = path.read_bytes()
    again = ensure_ed25519(path, "identity.key_file")
    assert again.key_id == first.key_id and path.read_bytes() == before  # reused, never overwritten
    pub = path.with_name("node.key.pub")
    pub.unlink()
    ensure_ed25519(path, "identity.key_file")
    assert load_verify_key(pub, "k").key_id == first.key_id  # a lost public half is written again
    pub.write_text(Ed25519Signer.generate().public.pem())
    ensure_ed25519(path, "identity.key_file")
    assert load_verify_key(pub, "k").key_id == first.key_id  # and one of another key is replaced
    path.chmod(0o644)
    with pytest.raises(ConfigError, match=r"identity\.key_file: .*chmod 600"):
        ensure_ed25519(path, "identity.key_file")
    secret = write_key(tmp_path / "hmac.key")
    with pytest.raises(ConfigError, match="HMAC secret where an Ed25519 key is expected"):
        ensure_ed25519(secret)


def test_derived_hmac_keys_differ_per_purpose_and_per_key() -> None:
    a, b = Ed25519Signer.generate(), Ed25519Signer.generate()
    state = derive_hmac(a, "myolo state records v1")
    assert state == derive_hmac(a, "myolo state records v1")  # every coordinator derives the same
    assert state.secret != derive_hmac(a, "another purpose").secret
    assert state.secret != derive_hmac(b, "myolo state records v1").secret
    legacy = HmacKey.of(b"s" * 32)
    assert derive_hmac(legacy, "p").secret not in (legacy.secret, derive_hmac(HmacKey.of(b"t" * 32), "p").secret)


def test_a_written_secret_reads_back_and_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "wm" / "owner.key"
    secret = write_secret(path)
    assert len(secret) == 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_secret(path, "watermark.key_file") == secret
    with pytest.raises(FileExistsError):
        write_secret(path)
    assert load_secret(path, "watermark.key_file") == secret


def test_a_secret_file_must_be_private_and_no_pem(tmp_path: Path) -> None:
    loose = tmp_path / "loose.key"
    loose.write_text("ab" * 32)
    loose.chmod(0o640)
    with pytest.raises(ConfigError, match="chmod 600") as err:
        load_secret(loose, "watermark.key_file")
    assert err.value.key == "watermark.key_file"
    pem = tmp_path / "pem.key"
    pem.write_bytes(Ed25519Signer.generate().pem())
    pem.chmod(0o600)
    with pytest.raises(ConfigError, match="PEM"):
        load_secret(pem, "watermark.key_file")


def test_a_watermark_commitment_names_the_key_without_showing_it() -> None:
    one, two = watermark_commitment(b"k" * 32), watermark_commitment(b"j" * 32)
    assert one != two and len(one) == 64 and one == watermark_commitment(b"k" * 32)
    assert ("6b" * 32) not in one
