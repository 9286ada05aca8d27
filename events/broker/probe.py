"""Ask a Kafka broker for its metadata over a plain socket.

Why raw bytes instead of aiokafka's admin client: the probe runs from synchronous code (the CLI, pytest's
session fixture) and from inside running event loops (the demo), and it must not drag a client's retry
and reconnect logic into a readiness loop that polls every few hundred milliseconds. Two tiny requests
are enough: ApiVersions (to learn which Metadata versions the broker accepts) and Metadata with an
empty topic list (to learn the brokers and the cluster id). A broker that answers Metadata with itself
in the broker list has finished starting and accepts clients.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

_API_METADATA = 3
_API_VERSIONS = 18
# Metadata v4..v8 share the non-flexible layout parsed below; v4 added allow_auto_topic_creation.
_METADATA_VERSIONS = (8, 7, 6, 5, 4)
_CLIENT_ID = b"myolo-probe"


@dataclass(frozen=True)
class BrokerAddress:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class ClusterMetadata:
    """What a Metadata response says about the cluster (topics are not requested)."""

    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerAddress, ...]


class ProbeError(Exception):
    """The broker did not answer, or answered something this probe cannot read."""


class _Reader:
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

    def string(self) -> str | None:
        length = self.take(">h")
        if length < 0:
            return None
        raw = self._data[self._pos : self._pos + length]
        self._pos += length
        return raw.decode("utf-8", "replace")


def _request(sock: socket.socket, api_key: int, version: int, correlation: int, body: bytes) -> _Reader:
    header = struct.pack(">hhih", api_key, version, correlation, len(_CLIENT_ID)) + _CLIENT_ID
    payload = header + body
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    size = struct.unpack(">i", _recv_exact(sock, 4))[0]
    reader = _Reader(_recv_exact(sock, size))
    if reader.take(">i") != correlation:
        raise ProbeError("broker answered with a different correlation id")
    return reader


def _recv_exact(sock: socket.socket, count: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < count:
        chunk = sock.recv(count - len(chunks))
        if not chunk:
            raise ProbeError("broker closed the connection")
        chunks.extend(chunk)
    return bytes(chunks)


def _metadata_version(sock: socket.socket) -> int:
    reader = _request(sock, _API_VERSIONS, 0, 1, b"")
    error = reader.take(">h")
    if error != 0:
        raise ProbeError(f"ApiVersions failed with error code {error}")
    ranges = {}
    for _ in range(reader.take(">i")):
        key, low, high = reader.take(">h"), reader.take(">h"), reader.take(">h")
        ranges[key] = (low, high)
    low, high = ranges.get(_API_METADATA, (1, 0))
    for version in _METADATA_VERSIONS:
        if low <= version <= high:
            return version
    raise ProbeError(f"broker supports Metadata v{low}..v{high}, none of v4..v8 this probe speaks")


def fetch_metadata(host: str, port: int, timeout: float = 2.0) -> ClusterMetadata:
    """One connection, ApiVersions then Metadata; raises ProbeError on any failure."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            version = _metadata_version(sock)
            body = struct.pack(">ib", 0, 0)  # no topics, no auto-creation
            if version >= 8:
                body += struct.pack(">bb", 0, 0)  # no authorized-operations lists
            reader = _request(sock, _API_METADATA, version, 2, body)
            reader.take(">i")  # throttle_time_ms
            brokers = []
            for _ in range(reader.take(">i")):
                node_id, host_name, node_port = reader.take(">i"), reader.string(), reader.take(">i")
                reader.string()  # rack
                brokers.append(BrokerAddress(node_id, host_name or "", node_port))
            cluster_id = reader.string()
            controller_id = reader.take(">i")
    except OSError as exc:
        raise ProbeError(f"cannot talk to {host}:{port}: {exc}") from exc
    return ClusterMetadata(cluster_id, controller_id, tuple(brokers))


def answers_metadata(host: str, port: int, timeout: float = 2.0) -> ClusterMetadata | None:
    """The metadata if the broker is up and lists at least one broker, else None."""
    try:
        meta = fetch_metadata(host, port, timeout)
    except ProbeError:
        return None
    return meta if meta.brokers else None
