"""GPU and node health: ok / warn / fail with reasons, by DCGM's XID classes and error-counter rules."""

from myolo.agent.health.faults import fault_from_event
from myolo.agent.health.model import Finding, summarise
from myolo.agent.health.rules import gpu_findings, pcie_replay_limit_per_min
from myolo.agent.health.state import HealthState, NodeHealth, classify_event
from myolo.agent.health.xid import FAIL_XIDS, WARN_XIDS, classify_xid, xid_level

__all__ = [
    "FAIL_XIDS",
    "WARN_XIDS",
    "Finding",
    "HealthState",
    "NodeHealth",
    "classify_event",
    "classify_xid",
    "fault_from_event",
    "gpu_findings",
    "pcie_replay_limit_per_min",
    "summarise",
    "xid_level",
]
