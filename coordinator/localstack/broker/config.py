"""The broker's identity (ports, cluster id) and its server.properties.

The identity is written once to `<kafka dir>/broker.json` and reused on every start, because a restart
must come back on the same ports with the same cluster id over the same log dirs (clients reconnect,
idempotent producers keep their sequence numbers, topics are still there).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from dataclasses import dataclass
from pathlib import Path

from myolo.coordinator.localstack.broker.ports import HOST

# Chosen for one-node development and tests, not for production.
_BASE_PROPERTIES = {
    "process.roles": "broker,controller",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "offsets.topic.replication.factor": "1",
    # 50 partitions (the default) make the first consumer group wait for 50 leaders; 8 is plenty here.
    "offsets.topic.num.partitions": "8",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "auto.create.topics.enable": "true",
}


@dataclass(frozen=True)
class BrokerIdentity:
    port: int
    controller_port: int
    cluster_id: str
    node_id: int = 1

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding, not starting with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def load_identity(path: Path) -> BrokerIdentity | None:
    try:
        return BrokerIdentity(**json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError):
        return None  # unreadable: treated as a fresh broker; the caller re-formats


def save_identity(path: Path, identity: BrokerIdentity) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dataclasses.asdict(identity), indent=2) + "\n")


def render_properties(identity: BrokerIdentity, data_dir: Path, extra: dict[str, str]) -> str:
    """server.properties for a combined broker+controller on loopback; `extra` wins over the defaults."""
    props = dict(_BASE_PROPERTIES)
    props.update(
        {
            "node.id": str(identity.node_id),
            "controller.quorum.voters": f"{identity.node_id}@{HOST}:{identity.controller_port}",
            "listeners": f"PLAINTEXT://{HOST}:{identity.port},CONTROLLER://{HOST}:{identity.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{identity.port}",
            "log.dirs": str(data_dir),
        }
    )
    props.update(extra)
    lines = ["# Written by the local stack on every start; edits are overwritten."]
    lines += [f"{key}={value}" for key, value in props.items()]
    return "\n".join(lines) + "\n"
