"""What the API (and other components) may ask of the nodes component."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from myolo.coordinator.core.errors import NotFound
from myolo.coordinator.nodes.records import NodeKeyRecord


class NotEnrolled(NotFound):
    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        hint = f"enrol it with PUT /v1/nodes/{node_id}/key"
        super().__init__(f"node {node_id!r} has no enrolled key", field="node_id", hint=hint)


@runtime_checkable
class NodeKeys(Protocol):
    async def enroll(self, node_id: str, public_key: str, by: str) -> tuple[NodeKeyRecord, str]:
        """Record ``public_key`` (PEM) as the node's key, then trust it. Returns the record and what changed:
        ``enrolled`` (no key was in force), ``replaced`` (another key was) or ``unchanged``. Raises NotLeader,
        ConfigError (``public_key``) for a key that is not an Ed25519 public key."""

    async def revoke(self, node_id: str, by: str) -> NodeKeyRecord:
        """Stop trusting the node's key (the record stays, marked revoked). Raises NotLeader, NotEnrolled."""

    def key_of(self, node_id: str) -> NodeKeyRecord | None: ...

    def key_records(self) -> tuple[NodeKeyRecord, ...]: ...
