"""The cordon writer: one decision in flight per node, a bounded queue, and nothing dropped when it is full."""

from __future__ import annotations

import asyncio

import msgspec

from myolo.common.clock import SimClock
from myolo.coordinator.cordons.records import CordonRecord
from myolo.coordinator.cordons.writer import CordonWriter
from myolo.coordinator.fleet.model import Cordon, NodeState


class Store:
    def __init__(self) -> None:
        self.puts: list[CordonRecord] = []

    async def put(self, topic, key, record) -> None:
        self.puts.append(record)


class Nodes:
    def __init__(self, *names: str) -> None:
        self.by_id = {n: NodeState(node_id=n) for n in names}

    def node(self, node_id: str) -> NodeState | None:
        return self.by_id.get(node_id)

    def set_cordon(self, record: Cordon) -> None:
        self.by_id[record.node_id] = msgspec.structs.replace(self.by_id[record.node_id], cordon=record)


async def test_a_full_queue_defers_decisions_and_loses_none() -> None:
    names = [f"n{i}" for i in range(5)]
    store, nodes = Store(), Nodes(*names)
    writer = CordonWriter(store, nodes, SimClock(), lambda: 7, queue_size=2)  # type: ignore[arg-type]
    for n in names:
        assert writer.request(n, "Lost", "auto:lost")
    assert not writer.request("n0", "Lost", "auto:lost")  # in flight already
    assert not writer.request("n4", "Lost", "auto:lost")  # deferred already
    assert writer.queued == 5 and writer.deferred_total == 3
    task = asyncio.create_task(writer.run())
    try:
        for _ in range(3):
            for _ in range(20):
                await asyncio.sleep(0)
            writer.requeue_deferred()  # what the component does on every tick
        for _ in range(20):
            await asyncio.sleep(0)
    finally:
        task.cancel()
    assert sorted(r.node_id for r in store.puts) == names and writer.queued == 0
    assert all(nodes.node(n).cordoned for n in names) and writer.cordons_written == 5
