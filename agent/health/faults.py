"""Turn a driver event into the ``NodeFault`` published the moment it is seen."""

from __future__ import annotations

from myolo.agent.gpu.backend import GpuEvent
from myolo.agent.health.model import Finding
from myolo.events.payloads import NodeFault
from myolo.events.payloads.node import FaultKind

_KIND: dict[str, FaultKind] = {
    "xid": "xid",
    "ecc_dbe": "ecc",
    "ecc_sbe": "ecc",
    "retirement": "ecc",
    "retirement_failure": "ecc",
    "gpu_unavailable": "health",
}


def fault_from_event(event: GpuEvent, node_id: str, finding: Finding) -> NodeFault:
    """``finding`` is what :meth:`HealthState.on_event` returned for ``event``."""
    return NodeFault(
        node_id=node_id,
        kind=_KIND.get(event.kind, "health"),
        health=finding.level,
        reasons=[finding.reason],
        gpu_index=event.gpu_index,
        gpu_uuid=event.gpu_uuid,
        xid=event.xid,
        message=event.detail,
        simulated=event.simulated,
    )
