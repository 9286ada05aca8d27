"""Placement: schedulable nodes and free healthy GPUs only, equal workers per node, tp inside a node, a
replica count within the bounds that divides the global batch."""

from __future__ import annotations

from myolo.coordinator.cordons.records import CordonRecord
from myolo.coordinator.fleet.model import NodeState
from myolo.coordinator.jobs.manifest import parse_manifest
from myolo.coordinator.jobs.placement import Capacity, capacity, place, replica_counts
from myolo.events.payloads import GpuReading


def manifest(min_r: int, max_r: int, tp: int = 1, pp: int = 1, batch: int = 12) -> str:
    return (
        "apiVersion: myolo.ai/v1\nkind: ElasticJob\nmetadata: {name: j}\n"
        f"spec:\n  minReplicas: {min_r}\n  maxReplicas: {max_r}\n  replica: {{tp: {tp}, pp: {pp}}}\n"
        f"  trainer: {{data: {{globalBatch: {batch}}}}}\n"
    )


def node(node_id: str, gpus: int, *, failing: tuple[int, ...] = (), **state: object) -> NodeState:
    readings = [
        GpuReading(index=i, uuid=f"{node_id}-{i}", name="sim", health="fail" if i in failing else "ok")
        for i in range(gpus)
    ]
    return NodeState(node_id=node_id, gpus=readings, **state)  # type: ignore[arg-type]


def test_capacity_skips_unschedulable_nodes_failing_and_held_gpus() -> None:
    cordon = CordonRecord(node_id="c", cordoned=True, reason="xid 79", by="auto:fault", time=0.0)
    nodes = [
        node("a", 4, failing=(1,)),
        node("b", 2, liveness="Lost"),
        node("c", 2, cordon=cordon),
        node("d", 2),
        node("e", 1),
    ]
    assert capacity(nodes, {"d": {0, 1}, "a": {3}}) == [Capacity("a", (0, 2)), Capacity("e", (0,))]


def test_one_gpu_replicas_over_three_nodes() -> None:
    spec = parse_manifest(manifest(1, 3))
    free = [Capacity(n, (0,)) for n in ("n1", "n2", "n3")]
    p = place(spec, free)
    assert p is not None and (p.replicas, p.workers_per_node, p.world_size) == (3, 1, 3)
    assert p.nodes == (("n1", (0,)), ("n2", (0,)), ("n3", (0,)))
    shrunk = place(spec, free[1:])  # a node is gone: two replicas on the other two
    assert shrunk is not None and shrunk.replicas == 2 and [n for n, _ in shrunk.nodes] == ["n2", "n3"]
    assert place(spec, free, want=2) is not None and place(spec, free, want=2).replicas == 2  # type: ignore[union-attr]


def test_the_replica_count_divides_the_global_batch() -> None:
    spec = parse_manifest(manifest(2, 5, batch=12))
    assert replica_counts(spec) == [4, 3, 2]
    p = place(spec, [Capacity(f"n{i}", (0,)) for i in range(5)])
    assert p is not None and p.replicas == 4  # 5 nodes free, but 5 does not divide 12


def test_tensor_parallel_groups_stay_inside_a_node_and_nodes_run_equal_workers() -> None:
    spec = parse_manifest(manifest(1, 4, tp=2, batch=8))
    free = [Capacity("a", (0, 1, 2, 3)), Capacity("b", (0, 1, 2)), Capacity("c", (5,))]
    p = place(spec, free)
    assert p is not None
    assert p.workers_per_node % 2 == 0 and all(len(g) == p.workers_per_node for _, g in p.nodes)
    assert p.replicas == 2 and p.nodes == (("a", (0, 1, 2, 3)),)  # ties: fewer, fuller nodes
    assert place(spec, [Capacity("c", (5,))]) is None  # tp=2 cannot use a node with one free GPU


def test_nothing_when_min_replicas_do_not_fit() -> None:
    spec = parse_manifest(manifest(3, 4))
    assert place(spec, [Capacity("a", (0,)), Capacity("b", (0,))]) is None
