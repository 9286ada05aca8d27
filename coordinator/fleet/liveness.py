"""Liveness in seconds: Ready while samples arrive, Suspect after a few missed intervals, Lost after a time.

Pure functions of (last seen, interval, now), evaluated on every tick of the coordinator's clock. Each node's
own sample interval counts (an operator may slow one node down), so Suspect means "missed N of *its*
samples". Lost is absolute (``lost_after_s``) because it is what reactions act on.
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.fleet.model import Liveness, NodeState
from coordinator.fleet.view import FleetView


@dataclass(frozen=True)
class LivenessPolicy:
    lost_after_s: float = 10.0
    suspect_after_intervals: int = 3

    def evaluate(self, last_seen: float, interval_s: float, now: float) -> Liveness:
        silent = now - last_seen
        if silent >= self.lost_after_s:
            return "Lost"
        if silent >= self.suspect_after_intervals * max(interval_s, 1e-3):
            return "Suspect"
        return "Ready"


@dataclass(frozen=True)
class Transition:
    node: NodeState
    before: Liveness
    after: Liveness
    silent_s: float


def tick(view: FleetView, policy: LivenessPolicy, now: float) -> list[Transition]:
    """Re-evaluate every node; return the changes (the node's ``liveness`` is updated in place).

    A node known only from the state topics (no sample yet) counts from when it entered the view."""
    changes = []
    for node in view.nodes_by_id.values():
        last = node.last_seen if node.last_seen is not None else view.since.get(node.node_id, now)
        after = policy.evaluate(last, node.sample_interval_s, now)
        if after != node.liveness:
            changes.append(Transition(node, node.liveness, after, now - last))
            node.liveness = after
    return changes
