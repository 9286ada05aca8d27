"""The client side of a SCRAM exchange (RFC 5802, RFC 7677), for our raw-protocol admin connection.

aiokafka speaks SCRAM for producers and consumers; the broker tools here (readiness probe, ACLs, users) talk
to the broker synchronously over a plain socket, so they carry this small exchange of their own. Also the
salted password a broker stores for a user (``salted_password``), which AlterUserScramCredentials sends.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
ITERATIONS = 4096  # Kafka's minimum for SCRAM-SHA-512


class ScramError(Exception):
    """The server's answer is malformed, or does not prove that it knows the password."""


def salted_password(password: str, salt: bytes, iterations: int, mechanism: str = "SCRAM-SHA-512") -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode(), salt, iterations)


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _fields(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"malformed SCRAM message from the server: {message[:120]!r}")
        out[key] = value
    return out


@dataclass
class ScramClient:
    """``first()`` -> send; ``final(server_first)`` -> send; ``verify(server_final)``."""

    username: str
    password: str
    mechanism: str = "SCRAM-SHA-512"
    nonce: str = ""

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"mechanism {self.mechanism!r} is not one of {sorted(MECHANISMS)}")
        self.nonce = self.nonce or secrets.token_urlsafe(24)
        self._bare = f"n={_saslname(self.username)},r={self.nonce}"
        self._server_signature = b""

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, MECHANISMS[self.mechanism]).digest()

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        fields = _fields(text)
        if "e" in fields:
            raise ScramError(f"the server refused: {fields['e']}")
        nonce, salt, iterations = fields.get("r", ""), fields.get("s"), fields.get("i", "")
        if not nonce.startswith(self.nonce) or salt is None or not iterations.isdigit():
            raise ScramError("the server's first SCRAM message lacks our nonce, its salt or its iterations")
        salted = salted_password(self.password, base64.b64decode(salt), int(iterations), self.mechanism)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(MECHANISMS[self.mechanism], client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        proof = bytes(a ^ b for a, b in zip(client_key, self._hmac(stored_key, auth_message), strict=True))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        fields = _fields(server_final.decode("utf-8", "replace"))
        if "e" in fields:
            raise ScramError(f"the server refused: {fields['e']}")
        if not hmac.compare_digest(base64.b64decode(fields.get("v", "")), self._server_signature):
            raise ScramError("the server's signature is wrong: it does not know this user's credentials")
