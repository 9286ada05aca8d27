"""One synchronous connection to a Kafka broker over a plain (or TLS) socket, SASL/SCRAM when asked.

Why raw bytes instead of aiokafka: the broker tools (readiness probe, SCRAM users, ACLs) run from synchronous
code (the CLI, pytest's session fixture) and from inside running event loops (the demo), must not drag a
client's retry and reconnect logic into a readiness loop, and need requests aiokafka's admin client does not
offer (CreateAcls, AlterUserScramCredentials). The few requests used are encoded by hand in the callers.
"""

from __future__ import annotations

import socket
import ssl
import struct
from dataclasses import dataclass
from pathlib import Path

from myolo.coordinator.localstack.broker.scram import ScramClient, ScramError

API_SASL_HANDSHAKE = 17
API_VERSIONS = 18
API_SASL_AUTHENTICATE = 36
_CLIENT_ID = b"myolo-broker-tool"
SASL_AUTHENTICATION_FAILED = 58


class ProbeError(Exception):
    """The broker did not answer, or answered something this client cannot read."""


class AuthenticationError(ProbeError):
    """The broker refused our credentials (wrong user or password), or spoke SCRAM wrongly."""


@dataclass(frozen=True)
class Credentials:
    """Who the connection authenticates as (SASL/SCRAM), and the CA to trust when the listener speaks TLS."""

    username: str
    password: str
    mechanism: str = "SCRAM-SHA-512"
    ca_file: Path | None = None  # TLS when set


class Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self._pos + size > len(self._data):
            raise ProbeError("truncated response from broker")
        (value,) = struct.unpack_from(fmt, self._data, self._pos)
        self._pos += size
        return value

    def raw(self, length: int) -> bytes:
        if length < 0:
            return b""
        if self._pos + length > len(self._data):
            raise ProbeError("truncated response from broker")
        out = self._data[self._pos : self._pos + length]
        self._pos += length
        return out

    def string(self) -> str | None:
        length = self.take(">h")
        return None if length < 0 else self.raw(length).decode("utf-8", "replace")

    def bytes_(self) -> bytes:
        return self.raw(self.take(">i"))

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.take(">B")
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def compact_string(self) -> str | None:
        length = self.uvarint() - 1
        return None if length < 0 else self.raw(length).decode("utf-8", "replace")

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.raw(self.uvarint())


def string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def compact_bytes(raw: bytes) -> bytes:
    return uvarint(len(raw) + 1) + raw


def compact_string(text: str) -> bytes:
    return compact_bytes(text.encode())


def _recv_exact(sock: socket.socket, count: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < count:
        chunk = sock.recv(count - len(chunks))
        if not chunk:
            raise ProbeError("broker closed the connection")
        chunks.extend(chunk)
    return bytes(chunks)


class Connection:
    """``with Connection(host, port, credentials) as conn: conn.request(...)``; raises ProbeError."""

    def __init__(self, host: str, port: int, credentials: Credentials | None = None, timeout: float = 5.0) -> None:
        self._correlation = 0
        self.versions: dict[int, tuple[int, int]] = {}
        try:
            raw = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ProbeError(f"cannot talk to {host}:{port}: {exc}") from exc
        try:
            raw.settimeout(timeout)
            if credentials is not None and credentials.ca_file is not None:
                context = ssl.create_default_context(cafile=str(credentials.ca_file))
                raw = context.wrap_socket(raw, server_hostname=host)
            self._sock = raw
            self._api_versions()
            if credentials is not None:
                self._authenticate(credentials)
        except OSError as exc:
            raw.close()
            raise ProbeError(f"cannot talk to {host}:{port}: {exc}") from exc
        except BaseException:
            raw.close()
            raise

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def request(self, api_key: int, version: int, body: bytes, *, flexible: bool = False) -> Reader:
        """Send one request, read its response (headers v1/v2, and response header v0/v1 when ``flexible``)."""
        self._correlation += 1
        header = struct.pack(">hhih", api_key, version, self._correlation, len(_CLIENT_ID)) + _CLIENT_ID
        if flexible:
            header += b"\x00"  # no tagged fields in the request header
        payload = header + body
        try:
            self._sock.sendall(struct.pack(">i", len(payload)) + payload)
            size = struct.unpack(">i", _recv_exact(self._sock, 4))[0]
            reader = Reader(_recv_exact(self._sock, size))
        except OSError as exc:
            raise ProbeError(f"the connection to the broker failed: {exc}") from exc
        if reader.take(">i") != self._correlation:
            raise ProbeError("broker answered with a different correlation id")
        if flexible and api_key != API_VERSIONS:
            reader.skip_tags()
        return reader

    def version(self, api_key: int, wanted: tuple[int, ...]) -> int:
        """The first of ``wanted`` the broker accepts for ``api_key``."""
        low, high = self.versions.get(api_key, (1, 0))
        for version in wanted:
            if low <= version <= high:
                return version
        raise ProbeError(f"broker supports API {api_key} v{low}..v{high}, none of {wanted} this client speaks")

    def _api_versions(self) -> None:
        reader = self.request(API_VERSIONS, 0, b"")
        error = reader.take(">h")
        if error != 0:
            raise ProbeError(f"ApiVersions failed with error code {error}")
        for _ in range(reader.take(">i")):
            key, low, high = reader.take(">h"), reader.take(">h"), reader.take(">h")
            self.versions[key] = (low, high)

    def _authenticate(self, cred: Credentials) -> None:
        reader = self.request(API_SASL_HANDSHAKE, 1, string(cred.mechanism))
        error = reader.take(">h")
        if error != 0:
            offered = [reader.string() for _ in range(reader.take(">i"))]
            raise AuthenticationError(f"the broker does not offer SASL {cred.mechanism} here (it offers {offered})")
        scram = ScramClient(cred.username, cred.password, cred.mechanism)
        try:
            server_first = self._sasl_step(scram.first())
            scram.verify(self._sasl_step(scram.final(server_first)))
        except ScramError as exc:
            raise AuthenticationError(f"SCRAM as {cred.username!r}: {exc}") from exc

    def _sasl_step(self, token: bytes) -> bytes:
        reader = self.request(API_SASL_AUTHENTICATE, 0, struct.pack(">i", len(token)) + token)
        error, message = reader.take(">h"), reader.string()
        if error != 0:
            raise AuthenticationError(message or f"SASL authentication failed (error code {error})")
        return reader.bytes_()
