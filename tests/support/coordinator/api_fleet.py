"""An in-memory coordinator for API and CLI tests: a fleet of NodeStates, a leader flag, cordon records.

It implements what the API's routes need (the core's ``CoreView``, the fleet's ``FleetReads``, the cordons'
``CordonWrites``) the way the real components behave towards the API (writes only when leading, NotLeader with
the leader's URL otherwise, UnknownNode for nodes never seen), without Kafka. ``app_for`` serves it with the
real routes and OpenAPI fragments of those components, behind the real gate (tokens from tests/support/api_auth.py,
audit records in memory).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import msgspec
from aiohttp import web

from myolo.common.clock import SimClock
from myolo.coordinator.api.app import create_app
from myolo.coordinator.cordons import routes as cordon_routes
from myolo.coordinator.cordons.component import Cordons
from myolo.coordinator.cordons.records import CordonRecord
from myolo.coordinator.core.component import RouteSet
from myolo.coordinator.core.errors import NotLeader, UnknownNode
from myolo.coordinator.fleet import routes as fleet_routes
from myolo.coordinator.fleet.component import Fleet
from myolo.coordinator.fleet.model import FaultEntry, NodeState
from myolo.events.payloads import GpuReading, LeakReport, NcclReport
from tests.support.api_auth import MemoryAudit, security

GIB = 1 << 30


def gpu(index: int, *, health: str = "ok", reasons: list[str] | None = None, util: float = 50.0) -> GpuReading:
    return GpuReading(
        index=index,
        uuid=f"GPU-sim-{index:04d}",
        name="Simulated H100 80GB",
        util_gpu=util,
        mem_total_bytes=80 * GIB,
        mem_used_bytes=20 * GIB,
        temp_gpu_c=55.0,
        power_w=300.0,
        health=health,
        health_reasons=reasons or [],
    )


def node(node_id: str, now: float, *, gpus: int = 2, **kw) -> NodeState:
    return NodeState(
        node_id=node_id,
        backend="sim",
        gpus=tuple(gpu(i) for i in range(gpus)),
        last_seen=now - 0.5,
        last_seq=10,
        agent_version="4.0.0",
        driver_version="sim",
        samples_seen=10,
        **kw,
    )


def sick_node(node_id: str, now: float) -> NodeState:
    """A node after XID 79 on GPU 1: failed, cordoned automatically, with NCCL and leak reports."""
    cordon = CordonRecord(node_id=node_id, cordoned=True, reason="xid 79 on GPU 1", by="auto:fault", time=now - 2)
    fault = FaultEntry(
        time=now - 2,
        kind="xid",
        health="fail",
        reasons=("XID 79: GPU has fallen off the bus",),
        gpu_index=1,
        xid=79,
        message="GPU has fallen off the bus",
    )
    nccl = NcclReport(
        node_id=node_id,
        pid=4242,
        rank=0,
        nranks=16,
        nnodes=2,
        version="2.21.5",
        network="IB",
        transports=["P2P/NVLink", "NET/IB/GDRDMA"],
        init_complete=True,
    )
    leak = LeakReport(
        node_id=node_id,
        subject="gpu",
        gpu_index=0,
        slope_pct_per_h=0.42,
        lower_pct_per_h=0.35,
        upper_pct_per_h=0.5,
        window_s=3600,
        samples=3600,
        alert=True,
    )
    state = node(node_id, now, health="fail", health_reasons=("gpu 1: XID 79",), cordon=cordon)
    gpus = (state.gpus[0], gpu(1, health="fail", reasons=["XID 79"], util=0.0), *state.gpus[2:])
    return msgspec.structs.replace(state, gpus=gpus, recent_faults=(fault,), nccl=(nccl,), leaks=(leak,))


@dataclass(frozen=True)
class Term:
    instance_id: str
    epoch: int
    api_url: str


class MemoryFleet:
    """FleetService over a dict; ``leader_url`` is where a standby points writes."""

    def __init__(self, instance_id: str = "coord-a", *, leader: bool = True, leader_url: str | None = None) -> None:
        self.clock = SimClock()
        self.instance_id = instance_id
        self.started = asyncio.Event()
        self.started.set()
        self.is_leader = leader
        self.leader_url = leader_url
        self.epoch = 3
        self.fleet: dict[str, NodeState] = {}
        self.writes: list[CordonRecord] = []

    def now(self) -> float:
        return self.clock.now()

    def add(self, state: NodeState) -> NodeState:
        self.fleet[state.node_id] = state
        return state

    def nodes(self) -> tuple[NodeState, ...]:
        return tuple(self.fleet.values())

    def node(self, node_id: str) -> NodeState | None:
        return self.fleet.get(node_id)

    def leader_info(self) -> Term | None:
        if self.is_leader:
            return Term(self.instance_id, self.epoch, self.leader_url or "http://127.0.0.1:1")
        return Term("coord-leader", self.epoch, self.leader_url) if self.leader_url else None

    def generations(self) -> tuple[int, int | None]:
        return 4, 4

    def metrics_text(self) -> str:
        """The fleet's series only, as a coordinator renders them."""
        from myolo.coordinator.core.metrics import CoordinatorMetrics
        from myolo.coordinator.fleet.series import series

        return CoordinatorMetrics(self.instance_id, [("fleet", lambda: series(self.fleet.values()))]).render()

    async def cordon(self, node_id: str, reason: str, by: str) -> CordonRecord:
        return self._write(node_id, True, reason, by)

    async def uncordon(self, node_id: str, reason: str, by: str) -> CordonRecord:
        return self._write(node_id, False, reason, by)

    def _write(self, node_id: str, cordoned: bool, reason: str, by: str) -> CordonRecord:
        if not self.is_leader:
            raise NotLeader(self.leader_url, "coord-leader" if self.leader_url else None)
        state = self.fleet.get(node_id)
        if state is None:
            raise UnknownNode(node_id)
        record = CordonRecord(
            node_id=node_id, cordoned=cordoned, reason=reason, by=by, time=self.now(), epoch=self.epoch
        )
        self.writes.append(record)
        self.fleet[node_id] = msgspec.structs.replace(state, cordon=record)
        return record


def parts_for(fleet: MemoryFleet) -> list[RouteSet]:
    """The fleet's and the cordons' real routes and OpenAPI fragments, over the in-memory fleet."""
    return [
        RouteSet(fleet_routes.routes(fleet), Fleet.openapi, health=lambda: {"nodes": len(fleet.fleet)}),
        RouteSet(cordon_routes.routes(fleet), Cordons.openapi),
    ]


def app_for(fleet: MemoryFleet, audit: MemoryAudit | None = None) -> web.Application:
    """The coordinator's API over the in-memory fleet: core, fleet and cordons routes."""
    return create_app(fleet, parts_for(fleet), security(audit, fleet.clock, fleet.instance_id))
