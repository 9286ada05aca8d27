"""What the dashboard shows of the fleet: a tile per node and GPU for the heat map (compact: 2,000 nodes x 8
GPUs in one answer), one node in full, and the faults and cordons for the events timeline."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import msgspec

from myolo.coordinator.core.dashboard import Moment
from myolo.coordinator.fleet.model import NodeState
from myolo.events.payloads import GpuReading

SLOWDOWNS = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)
RECENT_S = 3600.0  # an XID badge stays this long after the fault


class GpuTile(msgspec.Struct, frozen=True, array_like=True):
    """``[index, util %, memory %, temperature C, power W, health, last XID, uncorrected ECC, throttled]``."""

    index: int
    util: float | None
    mem: float | None
    temp: float | None
    power: float | None
    health: str
    xid: int | None
    ecc: int
    throttled: bool


class NodeTile(msgspec.Struct, kw_only=True, frozen=True):
    node_id: str
    liveness: str
    health: str
    cordoned: bool
    leak: bool
    gpus: list[GpuTile]


class FleetBoard(msgspec.Struct, kw_only=True, frozen=True):
    now: float
    nodes: list[NodeTile]


class NodeBoard(msgspec.Struct, kw_only=True, frozen=True):
    """One node as the fleet holds it (GPUs, faults, the cordon with who and why, releases)."""

    now: float
    node: NodeState


def _tile(gpu: GpuReading, xids: dict[int, int]) -> GpuTile:
    mem = gpu.mem_used_pct
    return GpuTile(
        index=gpu.index,
        util=gpu.util_gpu,
        mem=None if mem is None else round(mem, 1),
        temp=gpu.temp_gpu_c,
        power=None if gpu.power_w is None else round(gpu.power_w, 1),
        health=gpu.health,
        xid=xids.get(gpu.index),
        ecc=gpu.ecc_uncorrected_volatile or 0,
        throttled=bool(SLOWDOWNS.intersection(gpu.clock_event_reasons or ())),
    )


def node_tile(node: NodeState, now: float) -> NodeTile:
    xids = {
        f.gpu_index: f.xid
        for f in node.recent_faults
        if f.xid is not None and f.gpu_index is not None and now - f.time < RECENT_S
    }
    return NodeTile(
        node_id=node.node_id,
        liveness=node.liveness,
        health=node.health,
        cordoned=node.cordoned,
        leak=any(r.alert for r in node.leaks),
        gpus=[_tile(g, xids) for g in node.gpus],
    )


def board(nodes: Iterable[NodeState], now: float) -> FleetBoard:
    return FleetBoard(now=now, nodes=[node_tile(n, now) for n in sorted(nodes, key=lambda n: n.node_id)])


def moments(nodes: Iterable[NodeState]) -> Iterator[Moment]:
    """Each node's recent faults and its cordon decision."""
    for node in nodes:
        for f in node.recent_faults:
            what = f"XID {f.xid}" if f.xid is not None else f.kind
            where = f" on GPU {f.gpu_index}" if f.gpu_index is not None else ""
            why = "; ".join(f.reasons) or (f.message or "")
            yield Moment(time=f.time, kind="fault", subject=node.node_id, text=f"{what}{where} ({f.health}): {why}")
        c = node.cordon
        if c is not None:
            verb = "cordoned" if c.cordoned else "uncordoned"
            yield Moment(time=c.time, kind="cordon", subject=node.node_id, text=f"{verb} by {c.by}: {c.reason}")
