"""Signing keys: Ed25519 key pairs and HMAC secrets, read from files that only their owner may read.

Two kinds, one interface. Ed25519 (``cryptography``) is what we issue: whoever verifies holds only the public
half, so an agent that trusts the coordinators' public key cannot sign commands, and a coordinator that knows
a node's public key cannot sign that node's faults. HMAC-SHA256 secrets are still read, for clusters that
configured them before Ed25519; everyone who verifies them can also forge them.

A private key or secret file that its group or others can read is refused, as ssh refuses one: the error
names the file and ``chmod 600``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from myolo.common.errors import ConfigError

MIN_SECRET_BYTES = 16
MAX_KEY_FILE_BYTES = 16 * 1024
_PEM_PRIVATE = b"-----BEGIN PRIVATE KEY-----"
_PEM_PUBLIC = b"-----BEGIN PUBLIC KEY-----"


class Signer(Protocol):
    """Something that signs: ``sign_bytes`` returns the signature as hex."""

    key_id: str

    def sign_bytes(self, message: bytes) -> str: ...


class VerifyKey(Protocol):
    """Something that checks a signature made by the matching :class:`Signer`."""

    key_id: str

    def verify_bytes(self, message: bytes, signature: str) -> bool: ...


def _key_id(material: bytes) -> str:
    return hashlib.sha256(material).hexdigest()[:16]


@dataclass(frozen=True)
class HmacKey:
    """A shared secret: signs and verifies (HMAC-SHA256)."""

    key_id: str
    secret: bytes

    @classmethod
    def of(cls, secret: bytes) -> HmacKey:
        return cls(_key_id(secret), secret)

    def sign_bytes(self, message: bytes) -> str:
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest()

    def verify_bytes(self, message: bytes, signature: str) -> bool:
        # as bytes: compare_digest refuses str with non-ASCII characters, and a record may carry anything
        return hmac.compare_digest(self.sign_bytes(message).encode(), signature.encode(errors="replace"))


@dataclass(frozen=True)
class Ed25519Public:
    """The public half: verifies only."""

    key_id: str
    key: Ed25519PublicKey

    @classmethod
    def of(cls, key: Ed25519PublicKey) -> Ed25519Public:
        return cls(_key_id(_raw_public(key)), key)

    def verify_bytes(self, message: bytes, signature: str) -> bool:
        try:
            self.key.verify(bytes.fromhex(signature), message)
        except (InvalidSignature, ValueError):
            return False
        return True

    def pem(self) -> str:
        """The public key as PEM text: what ``myoloctl node enroll`` registers."""
        return self.key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ).decode()


@dataclass(frozen=True)
class Ed25519Signer:
    """A private key: signs; ``public`` is what the verifiers get."""

    key_id: str
    key: Ed25519PrivateKey

    @classmethod
    def of(cls, key: Ed25519PrivateKey) -> Ed25519Signer:
        return cls(_key_id(_raw_public(key.public_key())), key)

    @classmethod
    def generate(cls) -> Ed25519Signer:
        return cls.of(Ed25519PrivateKey.generate())

    @property
    def public(self) -> Ed25519Public:
        return Ed25519Public(self.key_id, self.key.public_key())

    def sign_bytes(self, message: bytes) -> str:
        return self.key.sign(message).hex()

    def verify_bytes(self, message: bytes, signature: str) -> bool:
        return self.public.verify_bytes(message, signature)

    def pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )


def _raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def derive_hmac(signer: Ed25519Signer | HmacKey, purpose: str) -> HmacKey:
    """A secret only holders of ``signer`` can compute, for one purpose (HKDF-SHA256).

    The coordinators sign their state records with it: they all hold the commands' private key, the agents
    (public key only) do not, and an HMAC costs microseconds where an Ed25519 verification costs tens."""
    material = (
        signer.secret
        if isinstance(signer, HmacKey)
        else signer.key.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )
    )
    secret = HKDF(algorithm=SHA256(), length=32, salt=None, info=purpose.encode()).derive(material)
    return HmacKey(f"{signer.key_id}/{purpose}", secret)


def check_private(path: Path, field: str) -> None:
    """Refuse a secret file its group or others may read or write (ssh's rule)."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise ConfigError(field, f"cannot read {str(path)!r}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise ConfigError(field, f"{str(path)!r} is not a regular file")
    if mode & 0o077:
        raise ConfigError(
            field,
            f"{str(path)!r} is accessible by others (mode {stat.S_IMODE(mode):04o}); "
            f"a key must be readable by its owner only: chmod 600 {path}",
        )


def _read(path: Path, field: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(field, f"cannot read {str(path)!r}: {exc.strerror}") from None
    if len(raw) > MAX_KEY_FILE_BYTES:
        raise ConfigError(field, f"{str(path)!r} is larger than {MAX_KEY_FILE_BYTES} bytes: not a key file")
    return raw.strip()


def _secret(raw: bytes, where: str, field: str) -> HmacKey:
    if raw.startswith(b"-----BEGIN "):  # a PEM of another kind must never pass for a secret (a public one!)
        label = raw[11:].split(b"-----", 1)[0].decode(errors="replace")[:40]
        raise ConfigError(
            field,
            f"{where} holds a PEM {label!r}, which is neither an Ed25519 key in PKCS#8/SubjectPublicKeyInfo form "
            "(`myoloctl keys generate` makes one) nor an HMAC secret",
        )
    try:
        secret = bytes.fromhex(raw.decode())
    except ValueError:
        secret = raw
    if len(secret) < MIN_SECRET_BYTES:
        raise ConfigError(field, f"key in {where} is {len(secret)} bytes; use >= {MIN_SECRET_BYTES}")
    return HmacKey.of(secret)


def _private(raw: bytes, where: str, field: str) -> Ed25519Signer:
    try:
        key = serialization.load_pem_private_key(raw, password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(field, f"{where} is not an unencrypted PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(field, f"{where} holds a {type(key).__name__}; only Ed25519 keys are used")
    return Ed25519Signer.of(key)


def _public_given(path: Path, field: str) -> ConfigError:
    return ConfigError(field, f"{str(path)!r} is a public key, which cannot sign: give the private key file")


def load_signer(path: str | Path, field: str = "signing.key_file") -> Ed25519Signer | HmacKey:
    """A private key (PEM, Ed25519) or an HMAC secret (hex or raw bytes) from a file only its owner can read."""
    p = Path(path)
    try:
        check_private(p, field)
    except ConfigError:
        if p.is_file() and _read(p, field).startswith(_PEM_PUBLIC):
            raise _public_given(p, field) from None
        raise
    raw = _read(p, field)
    if raw.startswith(_PEM_PUBLIC):
        raise _public_given(p, field)
    if raw.startswith(_PEM_PRIVATE):
        return _private(raw, repr(str(p)), field)
    return _secret(raw, repr(str(p)), field)


def public_key_from_pem(text: str | bytes, field: str) -> Ed25519Public:
    """An Ed25519 public key from PEM text (enrolment requests, public key files)."""
    raw = text.encode() if isinstance(text, str) else text
    if len(raw) > MAX_KEY_FILE_BYTES:
        raise ConfigError(field, f"larger than {MAX_KEY_FILE_BYTES} bytes: not a public key")
    try:
        key = serialization.load_pem_public_key(raw.strip())
    except (ValueError, TypeError) as exc:
        raise ConfigError(field, f"not a PEM public key: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise ConfigError(field, f"a {type(key).__name__}; only Ed25519 keys are used")
    return Ed25519Public.of(key)


def load_verify_key(path: str | Path, field: str) -> Ed25519Public | HmacKey:
    """What a verifier trusts: a public key file (anyone may read it), or an HMAC secret (owner only).

    A private key file is accepted too (its public half is used), so a coordinator can verify with the
    file it signs with."""
    p = Path(path)
    raw = _read(p, field)
    if raw.startswith(_PEM_PUBLIC):
        return public_key_from_pem(raw, field)
    check_private(p, field)
    if raw.startswith(_PEM_PRIVATE):
        return _private(raw, repr(str(p)), field).public
    return _secret(raw, repr(str(p)), field)


def write_private(path: Path, signer: Ed25519Signer) -> None:
    """Write a new private key, mode 0600 from its creation on; an existing file is never overwritten."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(signer.pem())


def public_path(path: Path) -> Path:
    """Where the public half of the private key at ``path`` is kept: ``<path>.pub``."""
    return path.with_name(path.name + ".pub")


def ensure_ed25519(path: Path, field: str = "signing.key_file") -> Ed25519Signer:
    """The Ed25519 key at ``path``, generated there (0600) when there is none, with its ``.pub`` beside it
    (written again when missing or not this key's: it is what an operator copies to enrol the key)."""
    found: Ed25519Signer | HmacKey | None = None
    if not path.exists():
        found = Ed25519Signer.generate()
        try:
            write_private(path, found)
        except FileExistsError:
            found = None  # another process made it first: read theirs
    if found is None:
        found = load_signer(path, field)
    if not isinstance(found, Ed25519Signer):
        raise ConfigError(field, f"{str(path)!r} holds an HMAC secret where an Ed25519 key is expected")
    pub = public_path(path)
    try:
        if not pub.is_file() or pub.read_text() != found.public.pem():
            pub.write_text(found.public.pem())
    except OSError:
        pass  # a read-only key directory: the key still works, and `key show` prints the public half
    return found


def load_secret(path: str | Path, field: str) -> bytes:
    """A shared secret (hex, or raw bytes of at least ``MIN_SECRET_BYTES``) from a file only its owner can
    read; a PEM key of any kind is refused, since a secret must never be a public key."""
    p = Path(path)
    check_private(p, field)
    return _secret(_read(p, field), repr(str(p)), field).secret


def write_secret(path: Path, nbytes: int = 32) -> bytes:
    """A new random secret written as hex, mode 0600 from its creation on; an existing file is never
    overwritten (``FileExistsError``)."""
    secret = os.urandom(nbytes)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret.hex() + "\n")
    return secret


def watermark_commitment(secret: bytes) -> str:
    """What names a watermark key without revealing it (HMAC-SHA256 of a fixed label): recorded by the
    registry, compared by ``myoloctl registry verify-watermark`` before a check runs."""
    return hmac.new(secret, b"myolo-watermark/commitment", hashlib.sha256).hexdigest()
