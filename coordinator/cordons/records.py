"""What the cordons component writes to ``myolo.state.nodes`` (keyed by node id): one ``CordonRecord`` per node."""

from __future__ import annotations

import msgspec

STATE_NODES = "myolo.state.nodes"  # the compacted topic they are written to


class CordonRecord(msgspec.Struct, kw_only=True, frozen=True):
    """Why a node gets no new work. Written to ``myolo.state.nodes`` (keyed by node id) before acting."""

    node_id: str
    cordoned: bool
    reason: str
    by: str  # "auto:fault", "auto:lost", "auto:alive", "operator:<name>"
    time: float
    epoch: int = 0
    silent_since: float | None = None  # auto:lost only: when the node was last known alive
