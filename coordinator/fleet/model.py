"""The fleet view's data: per node, its GPUs, health, liveness, NCCL facts, leak status, cordon state.

These Structs are the coordinator's in-memory state, the HTTP API's JSON (``GET /v1/nodes``), and what
``myoloctl get/describe`` renders. Durable decisions (cordons) are the cordons component's records; the node
shows its own copy of the latest one, a ``Cordon``.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from myolo.events.payloads import BandwidthReport, FailedRelease, GpuReading, LeakReport, NcclReport, NodeFault
from myolo.events.payloads.common import Health

Liveness = Literal["Ready", "Suspect", "Lost"]


class Cordon(msgspec.Struct, kw_only=True, frozen=True):
    """The cordon decision a node shows: who decided it, why and when (the cordons component decides and keeps
    the record; the fleet only shows it, with the same fields in its JSON)."""

    node_id: str
    cordoned: bool
    reason: str
    by: str  # "auto:fault", "auto:lost", "auto:alive", "operator:<name>"
    time: float
    epoch: int = 0
    silent_since: float | None = None  # auto:lost only: when the node was last known alive


class FaultEntry(msgspec.Struct, kw_only=True, frozen=True):
    """A fault as the coordinator recorded it (recent faults of a node, newest last, bounded)."""

    time: float
    kind: str
    health: Health
    reasons: tuple[str, ...] = ()
    gpu_index: int | None = None
    xid: int | None = None
    message: str | None = None

    @classmethod
    def from_event(cls, fault: NodeFault, time: float) -> FaultEntry:
        return cls(
            time=time,
            kind=fault.kind,
            health=fault.health,
            reasons=tuple(fault.reasons),
            gpu_index=fault.gpu_index,
            xid=fault.xid,
            message=fault.message,
        )


class NodeState(msgspec.Struct, kw_only=True, frozen=True):
    """Everything the coordinator knows about one node. Immutable: the fleet view swaps in a new one per
    event, so a node another component holds is a consistent snapshot that nobody else can change."""

    node_id: str
    liveness: Liveness = "Ready"
    health: Health = "ok"
    health_reasons: tuple[str, ...] = ()
    backend: str | None = None  # "nvml" | "sim"
    gpus: tuple[GpuReading, ...] = ()
    # when the node was last known alive (coordinator clock): a fresh sample's arrival, or a delayed one's own time
    last_seen: float | None = None
    last_event_time: float | None = None  # the newest sample's own time (the node's clock)
    # since when the node's samples follow each other without a gap longer than lost_after_s (the node's clock):
    # delayed samples that cover a silence show the node never stopped
    continuous_since: float | None = None
    last_seq: int | None = None
    sample_interval_s: float = 1.0
    agent_version: str | None = None
    agent_on_trial: str | None = None  # the agent release it runs on trial (not committed), from the newest sample
    driver_version: str | None = None
    address: str | None = None  # where other nodes reach it (a job's rendezvous), from the newest sample
    health_url: str | None = None  # its agent's HTTP endpoint (health, workers' logs), from the newest sample
    # releases the node switched back from by itself (a trial that never committed), from the newest sample
    failed_releases: tuple[FailedRelease, ...] = ()
    cordon: Cordon | None = None
    recent_faults: tuple[FaultEntry, ...] = ()
    nccl: tuple[NcclReport, ...] = ()  # latest report per communicator (bounded)
    bandwidth: BandwidthReport | None = None  # the node's last all-reduce probe (a command's or the idle schedule's)
    leaks: tuple[LeakReport, ...] = ()  # latest report per tracked series (bounded)
    samples_seen: int = 0
    flags: tuple[str, ...] = ()  # recent records rejected as implausible, with the reason (bounded, newest last)

    @property
    def cordoned(self) -> bool:
        return self.cordon is not None and self.cordon.cordoned

    @property
    def schedulable(self) -> bool:
        """May this node get new work? (the jobs component asks this)"""
        return self.liveness == "Ready" and self.health != "fail" and not self.cordoned
