"""Is a node event that causes action really from the node it is about?

It must come from that node's agent (its CloudEvents ``source``) and carry a signature by the key the node is
enrolled with. Otherwise it is refused with the reason (the consumer dead-letters it) before any component
sees it: a fault nobody can tie to its node never cordons it, a forged ack never closes a command's intent.
"""

from __future__ import annotations

from dataclasses import dataclass

from myolo.common.keys import Ed25519Public
from myolo.coordinator.nodes.records import NodeKeyRecord
from myolo.events.envelope import Event
from myolo.events.errors import SignatureError
from myolo.events.signing import verify_with
from myolo.events.sources import agent_source


@dataclass(frozen=True)
class Enrolled:
    """A node's key record and the key itself (None: the record's PEM does not read as the key it names)."""

    record: NodeKeyRecord
    key: Ed25519Public | None


def check_node_event(event: Event, node_id: str, enrolled: Enrolled | None) -> None:
    """Raise :class:`SignatureError` (an ``InvalidEvent``) naming why ``event`` about ``node_id`` is refused."""
    if enrolled is None:
        raise SignatureError(
            f"node {node_id!r} is not enrolled; enrol its key with `myoloctl node enroll {node_id} "
            "--public-key node.key.pub` (from `myolo-agent key show`)",
            "data.node_id",
        )
    record = enrolled.record
    if record.revoked:
        raise SignatureError(
            f"node {node_id!r} is revoked: its key {record.key_id!r} was revoked by {record.revoked_by}; "
            "enrol a new key to accept its events again",
            "data.node_id",
        )
    expected = agent_source(node_id)
    if event.source != expected:
        raise SignatureError(f"source {event.source!r} is not {node_id}'s agent (expected {expected!r})", "source")
    if enrolled.key is None:
        raise SignatureError(f"the enrolled key of node {node_id!r} cannot be read; enrol it again", "data.node_id")
    verify_with(event, enrolled.key, f"{event.type} of node {node_id!r}")
