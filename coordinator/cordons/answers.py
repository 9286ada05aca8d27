"""What ``POST /v1/nodes/{node_id}/cordon|uncordon`` answers, and what ``myoloctl cordon`` reads."""

from __future__ import annotations

import msgspec

from myolo.coordinator.cordons.records import CordonRecord


class CordonAnswer(msgspec.Struct, kw_only=True):
    """The node and its cordon record as written."""

    node_id: str
    cordon: CordonRecord
