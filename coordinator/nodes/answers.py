"""What the node-key routes answer, and what ``myoloctl node`` reads."""

from __future__ import annotations

import msgspec

from myolo.coordinator.nodes.records import NodeKeyRecord


class NodeKeyAnswer(NodeKeyRecord, kw_only=True, omit_defaults=True, frozen=True):
    """A node's key record; after an enrolment, also what it changed (enrolled, replaced, unchanged)."""

    change: str | None = None


class NodeKeyList(msgspec.Struct, kw_only=True):
    items: list[NodeKeyAnswer]


def key_answer(record: NodeKeyRecord, change: str | None = None) -> NodeKeyAnswer:
    return NodeKeyAnswer(**msgspec.structs.asdict(record), change=change)
