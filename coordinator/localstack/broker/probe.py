"""Ask a Kafka broker for its metadata over one raw connection (``wire.py``), as a readiness probe.

Two tiny requests are enough: ApiVersions (to learn which Metadata versions the broker accepts) and Metadata
with an empty topic list (to learn the brokers and the cluster id). A broker that answers Metadata with itself
in the broker list has finished starting and accepts clients. A secured broker answers only once the probe
has authenticated (``credentials``: the admin's, SCRAM, TLS when the listener speaks it).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from myolo.coordinator.localstack.broker.wire import Connection, Credentials, ProbeError

__all__ = ["BrokerAddress", "ClusterMetadata", "ProbeError", "answers_metadata", "fetch_metadata"]

_API_METADATA = 3
# Metadata v4..v8 share the non-flexible layout parsed below; v4 added allow_auto_topic_creation.
_METADATA_VERSIONS = (8, 7, 6, 5, 4)


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


def fetch_metadata(
    host: str, port: int, timeout: float = 2.0, credentials: Credentials | None = None
) -> ClusterMetadata:
    """One connection, ApiVersions (then SASL) then Metadata; raises ProbeError on any failure."""
    with Connection(host, port, credentials, timeout) as conn:
        version = conn.version(_API_METADATA, _METADATA_VERSIONS)
        body = struct.pack(">ib", 0, 0)  # no topics, no auto-creation
        if version >= 8:
            body += struct.pack(">bb", 0, 0)  # no authorized-operations lists
        reader = conn.request(_API_METADATA, version, body)
        reader.take(">i")  # throttle_time_ms
        brokers = []
        for _ in range(reader.take(">i")):
            node_id, host_name, node_port = reader.take(">i"), reader.string(), reader.take(">i")
            reader.string()  # rack
            brokers.append(BrokerAddress(node_id, host_name or "", node_port))
        cluster_id = reader.string()
        controller_id = reader.take(">i")
    return ClusterMetadata(cluster_id, controller_id, tuple(brokers))


def answers_metadata(
    host: str, port: int, timeout: float = 2.0, credentials: Credentials | None = None
) -> ClusterMetadata | None:
    """The metadata if the broker is up and lists at least one broker, else None."""
    try:
        meta = fetch_metadata(host, port, timeout, credentials)
    except ProbeError:
        return None
    return meta if meta.brokers else None
