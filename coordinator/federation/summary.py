"""A cell leader's summary of its fleet view: counts by node class, nothing per node or per GPU."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from myolo.coordinator.federation.records import CellSummary, NodeClass
from myolo.coordinator.fleet.model import NodeState


@dataclass
class _Tally:
    nodes: int = 0
    ready: int = 0
    suspect: int = 0
    lost: int = 0
    cordoned: int = 0
    schedulable: int = 0
    gpus_schedulable: int = 0
    agents: dict[str, int] = field(default_factory=dict)
    on_trial: int = 0


def node_class(node: NodeState) -> str:
    """The class a node is counted in: its GPUs' model and how many it has."""
    if not node.gpus:
        return "unknown"
    return f"{node.gpus[0].name} x{len(node.gpus)}"


def summarize(
    cell: str, epoch: int, at: float, nodes: Iterable[NodeState], held_gpus: Mapping[str, int] | None = None
) -> CellSummary:
    """Count ``nodes`` by class. ``held_gpus``: GPUs the cell's jobs hold, by node id (not schedulable)."""
    held = held_gpus or {}
    tallies: dict[str, _Tally] = {}
    for node in nodes:
        t = tallies.setdefault(node_class(node), _Tally())
        t.nodes += 1
        if node.liveness == "Ready":
            t.ready += 1
        elif node.liveness == "Suspect":
            t.suspect += 1
        else:
            t.lost += 1
        t.cordoned += node.cordoned
        if node.schedulable:
            t.schedulable += 1
            t.gpus_schedulable += max(0, len(node.gpus) - held.get(node.node_id, 0))
        version = node.agent_version or "unknown"
        t.agents[version] = t.agents.get(version, 0) + 1
        t.on_trial += node.agent_on_trial is not None
    classes = tuple(NodeClass(gpu=name, **vars(t)) for name, t in sorted(tallies.items()))
    return CellSummary(cell=cell, epoch=epoch, at=at, nodes=sum(c.nodes for c in classes), classes=classes)
