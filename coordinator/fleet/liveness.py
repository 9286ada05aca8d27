"""Liveness in seconds: Ready while samples arrive, Suspect after a few missed intervals, Lost after a time.

Pure functions of (last seen, interval, now), evaluated on every tick of the coordinator's clock. Each node's
own sample interval counts (an operator may slow one node down), so Suspect means "missed N of *its*
samples". Lost is absolute (``lost_after_s``) because it is what reactions act on.
"""

from __future__ import annotations

from dataclasses import dataclass

from myolo.coordinator.fleet.interface import Transition
from myolo.coordinator.fleet.model import Liveness, NodeState
from myolo.coordinator.fleet.view import FleetView


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


def last_alive(view: FleetView, node: NodeState, now: float) -> float:
    """When the node was last known alive; a node known only from the state counts from when it appeared."""
    return node.last_seen if node.last_seen is not None else view.since.get(node.node_id, now)


def all_silent(view: FleetView, policy: LivenessPolicy, now: float, min_nodes: int) -> bool:
    """Did every node that was not Lost fall silent at once (at least ``min_nodes`` of them)? Then it is far
    more likely that the bus or the network went away than that every node died."""
    live = [n for n in view.nodes_by_id.values() if n.liveness != "Lost"]
    if len(live) < min_nodes:
        return False
    return all(policy.evaluate(last_alive(view, n, now), n.sample_interval_s, now) != "Ready" for n in live)


def tick(view: FleetView, policy: LivenessPolicy, now: float, *, hold_lost: bool = False) -> list[Transition]:
    """Re-evaluate every node; return the changes (each changed node is swapped for one with its new liveness).

    With ``hold_lost`` (the coordinator cannot tell a silent node from a silent bus) no node becomes Lost:
    it stays Suspect until the verdict can be trusted again; a node already Lost stays Lost."""
    changes = []
    for node in view.nodes_by_id.values():  # a swap replaces a value, never a key: the iteration stays valid
        last = last_alive(view, node, now)
        after = policy.evaluate(last, node.sample_interval_s, now)
        if hold_lost and after == "Lost" and node.liveness != "Lost":
            after = "Suspect"
        if after != node.liveness:
            changes.append(Transition(view.swap(node, liveness=after), node.liveness, after, now - last))
    return changes
