"""Which facts make the leader cordon a node, and the record that says why.

Pure decisions, so they are tested without Kafka: a FAIL-class fault, a sample whose health is FAIL, or a
Lost node cordon the node; a WARN only when ``act_on_warn`` is set (otherwise it is shown, not acted on).
A node that is already cordoned is left as it is: the first reason stays, an operator's cordon is never
overwritten by an automatic one, and no automatic rule ever uncordons (a person decides a node is fine).
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from myolo.coordinator.cordons.records import CordonRecord
from myolo.coordinator.fleet.interface import Cordon, NodeState, Transition
from myolo.events.payloads import NodeFault, NodeSample

AUTO_FAULT = "auto:fault"
AUTO_LOST = "auto:lost"
AUTO_ALIVE = "auto:alive"  # a Lost cordon lifted because the node's delayed samples show it never stopped


@dataclass(frozen=True)
class CordonPolicy:
    act_on_warn: bool = False

    def acts_on(self, health: str) -> bool:
        return health == "fail" or (health == "warn" and self.act_on_warn)

    def for_fault(self, node: NodeState, fault: NodeFault) -> tuple[str, str] | None:
        """(reason, by) when this fault should cordon the node."""
        if node.cordoned or not self.acts_on(fault.health):
            return None
        what = f"{fault.kind} {fault.xid}" if fault.xid is not None else fault.kind
        gpu = f" on GPU {fault.gpu_index}" if fault.gpu_index is not None else ""
        detail = "; ".join(fault.reasons) or fault.message or ""
        return f"{fault.health.upper()} {what}{gpu}" + (f": {detail}" if detail else ""), AUTO_FAULT

    def for_sample(self, node: NodeState, sample: NodeSample) -> tuple[str, str] | None:
        """A sample that reports FAIL health (the fault event itself may have been missed or rejected)."""
        if node.cordoned or not self.acts_on(sample.health):
            return None
        detail = "; ".join(sample.health_reasons) or "no reason given"
        return f"{sample.health.upper()} health in sample: {detail}", AUTO_FAULT

    def for_transition(self, t: Transition) -> tuple[str, str] | None:
        if t.after != "Lost" or t.node.cordoned:
            return None
        return f"Lost: no sample for {t.silent_s:.1f} s", AUTO_LOST


def never_stopped(node: NodeState) -> str | None:
    """Why an automatic Lost cordon can be lifted: the node's own samples, arriving late, cover the silence
    without a gap longer than ``lost_after_s`` up to the cordon and after it. None while they do not (yet)."""
    cordon = node.cordon
    if cordon is None or not cordon.cordoned or cordon.by != AUTO_LOST or cordon.silent_since is None:
        return None
    since, last = node.continuous_since, node.last_event_time
    if since is None or last is None or since > cordon.silent_since or last < cordon.time:
        return None
    return (
        f"delayed samples show the node never stopped: samples without a long gap from before it fell silent "
        f"until after the cordon (up to seq {node.last_seq}); the silence was the bus, not the node"
    )


def operator_by(name: str) -> str:
    """``by`` of a hand-made cordon. A name is required so the record says who decided."""
    name = name.strip()
    if not name:
        raise ValueError("by: say who cordons (operator name), e.g. by='alice'")
    return name if name.startswith("operator:") else f"operator:{name}"


def record(
    node_id: str, cordoned: bool, reason: str, by: str, now: float, epoch: int, silent_since: float | None = None
) -> CordonRecord:
    return CordonRecord(
        node_id=node_id, cordoned=cordoned, reason=reason, by=by, time=now, epoch=epoch, silent_since=silent_since
    )


def shown(rec: CordonRecord) -> Cordon:
    """What the fleet shows of a cordon record on its node: every field, in the fleet's own Struct."""
    return Cordon(**msgspec.structs.asdict(rec))
