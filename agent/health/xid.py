"""XID classes after DCGM >= 4.4: which driver-reported XIDs mean a GPU has failed, which call for a look.

XIDs not listed are informational for health (for example 13 or 45, which user programs cause all the
time): they are still published as faults, but do not change a GPU's health.
"""

from __future__ import annotations

from myolo.agent.health.model import Finding
from myolo.events.payloads.common import Health

FAIL_XIDS: dict[int, str] = {
    48: "double-bit ECC error",
    64: "row-remap failure",
    74: "NVLink error",
    79: "fallen off the bus",
    95: "uncontained ECC error",
    119: "GSP error",
    120: "GSP error",
    140: "unrecovered ECC error",
}

WARN_XIDS: dict[int, str] = {
    31: "memory page fault",
    32: "corrupted push buffer",
    43: "GPU stopped processing",
    63: "page retirement / row remap pending",
    94: "contained ECC error",
    **dict.fromkeys((38, 39, 42), "PCIe"),
    **dict.fromkeys((60, 61, 62), "thermal"),
    **dict.fromkeys((54, 56, 57, 58, 78), "power"),
    **dict.fromkeys((67, 73, 121, 137), "NVLink"),
}


def xid_level(xid: int) -> Health:
    if xid in FAIL_XIDS:
        return "fail"
    if xid in WARN_XIDS:
        return "warn"
    return "ok"


def xid_description(xid: int) -> str:
    """The XID's class in a few words (``fallen off the bus``)."""
    return FAIL_XIDS.get(xid) or WARN_XIDS.get(xid) or "unclassified, informational"


def classify_xid(xid: int) -> Finding:
    """Level and a reason that names the XID and its class."""
    return Finding(xid_level(xid), f"xid {xid} ({xid_description(xid)})")
