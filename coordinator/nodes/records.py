"""The record of ``myolo.state.node-keys`` (keyed by node id): which public key a node signs with."""

from __future__ import annotations

import msgspec

KIND = "node-key"


class NodeKeyRecord(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """A node's enrolled Ed25519 public key (PEM), its key id (what the node's events name in ``ce_sigkeyid``),
    who enrolled it and when; a revoked key stays on record (who revoked it, when) and verifies nothing."""

    node_id: str
    public_key: str
    key_id: str
    enrolled_at: float
    by: str
    epoch: int = 0  # the leadership term that wrote it
    revoked: bool = False
    revoked_at: float | None = None
    revoked_by: str | None = None

    @property
    def changed_at(self) -> float:
        """When this record was written (an echo older than what we hold is not applied)."""
        return self.revoked_at if self.revoked_at is not None else self.enrolled_at


STATE_NODE_KEYS = "myolo.state.node-keys"  # the compacted topic they are written to
