"""Where a job generation's replicas go: pure functions of the fleet's capacity and the job's spec.

Rules (torchrun's, and tensor parallelism's):
- only schedulable nodes (Ready, healthy, not cordoned), and on them only GPUs that are not failing and
  not held by another job;
- every node of a generation runs the same number of workers ``w`` (global rank = node rank x w + local
  rank), and ``w`` is a multiple of tp, so a tensor-parallel group never crosses a node (tp is the fastest
  dimension of the rank order);
- the replica count ``R`` is within [minReplicas, maxReplicas] and divides the global batch (each replica
  gets an equal share; accumulation makes up the rest, so the optimisation is the same at any R).

Among the layouts that fit, the most replicas up to the wanted count win, then the fewest nodes (fewer,
fuller nodes keep more traffic on NVLink), then node ids in order (deterministic for a new leader).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from myolo.coordinator.fleet.interface import NodeState
from myolo.coordinator.jobs.manifest import ElasticJobSpec


@dataclass(frozen=True)
class Capacity:
    node_id: str
    free_gpus: tuple[int, ...]  # indices, ascending


@dataclass(frozen=True)
class Placement:
    replicas: int
    workers_per_node: int
    nodes: tuple[tuple[str, tuple[int, ...]], ...]  # (node id, its GPUs), in node-rank order

    @property
    def world_size(self) -> int:
        return self.workers_per_node * len(self.nodes)


def capacity(nodes: Iterable[NodeState], held: dict[str, set[int]]) -> list[Capacity]:
    """The free GPUs of each schedulable node; ``held`` maps node ids to GPUs other jobs hold there."""
    out = []
    for node in nodes:
        if not node.schedulable:
            continue
        taken = held.get(node.node_id, set())
        free = tuple(sorted(g.index for g in node.gpus if g.health != "fail" and g.index not in taken))
        if free:
            out.append(Capacity(node.node_id, free))
    return sorted(out, key=lambda c: c.node_id)


def replica_counts(spec: ElasticJobSpec) -> list[int]:
    """The replica counts this job may run at, most first."""
    r = range(spec.max_replicas, spec.min_replicas - 1, -1)
    return [n for n in r if spec.trainer.data.global_batch % n == 0]


def place(spec: ElasticJobSpec, free: list[Capacity], want: int | None = None) -> Placement | None:
    """The best placement of at most ``want`` replicas (default maxReplicas); None when not even
    minReplicas fit."""
    per_replica, allowed = spec.gpus_per_replica, set(replica_counts(spec))
    best: tuple[tuple[int, int, int], Placement] | None = None
    most = max((len(c.free_gpus) for c in free), default=0)
    for w in range(spec.tp, most + 1, spec.tp):  # workers per node: a multiple of tp
        fits = [c for c in free if len(c.free_gpus) >= w]
        for k in range(1, len(fits) + 1):
            if (k * w) % per_replica:
                continue
            replicas = k * w // per_replica
            if replicas not in allowed or (want is not None and replicas > want):
                continue
            chosen = tuple((c.node_id, c.free_gpus[:w]) for c in fits[:k])
            key = (replicas, -k, w)
            if best is None or key > best[0]:
                best = (key, Placement(replicas=replicas, workers_per_node=w, nodes=chosen))
    return best[1] if best else None
