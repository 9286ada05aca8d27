"""What the nodes component's own HTTP routes ask of it: enrolled keys as its records, enrolment and revocation.
No other component asks the nodes component anything (it guards events, ``component.py``)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from myolo.coordinator.nodes.records import NodeKeyRecord


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
