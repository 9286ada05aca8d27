"""Faults the simulated fleet suffers: which XIDs, how often, and the ``NodeFault`` a real agent would send.

A fleet of thousands of GPUs sees faults as a Poisson process; ``FaultPlan`` draws the gaps between them
from an exponential distribution at a fleet-wide rate, and each fault's XID from a mix weighted towards the
common, harmless-to-the-node WARN class (contained ECC errors, page faults) over the FAIL class that must
cordon a node (fallen off the bus, double-bit ECC). Classes come from ``myolo.agent.health.xid``, the same table the
real agent uses, so simulator and agent agree on what a FAIL is.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from myolo.agent.health.xid import classify_xid
from myolo.events.payloads import NodeFault

# (xid, weight): mostly WARN, some FAIL, like a large fleet's logs
DEFAULT_MIX: tuple[tuple[int, float], ...] = ((94, 0.45), (31, 0.2), (63, 0.1), (79, 0.1), (48, 0.1), (74, 0.05))


def xid_fault(node_id: str, gpu: int, xid: int, gpu_uuid: str | None = None) -> NodeFault:
    """The fault an agent publishes when its driver reports ``xid`` on GPU ``gpu`` (labelled simulated)."""
    finding = classify_xid(xid)
    return NodeFault(
        node_id=node_id,
        kind="xid",
        health=finding.level,
        reasons=[finding.reason],
        gpu_index=gpu,
        gpu_uuid=gpu_uuid,
        xid=xid,
        message=f"NVRM: Xid (PCI:0000:{gpu + 0x18:02x}:00): {xid}, simulated by myolo fleetsim",
        simulated=True,
    )


@dataclass
class FaultPlan:
    """When the next random fault happens, on which node and GPU, with which XID.

    ``rate_per_s`` is for the whole fleet (0 turns random faults off): 2,000 nodes at 0.01 see a fault every
    100 s, about what a fleet of that size logs in a bad hour."""

    rate_per_s: float
    nodes: int
    gpus: int
    seed: int = 0
    mix: tuple[tuple[int, float], ...] = DEFAULT_MIX

    def __post_init__(self) -> None:
        if self.rate_per_s < 0:
            raise ValueError(f"fault_rate: must be >= 0 faults per second for the fleet, got {self.rate_per_s}")
        for xid, weight in self.mix:
            if weight < 0 or xid < 0:
                raise ValueError(f"fault mix: XID {xid} weight {weight}: both must be >= 0")
        self._rng = random.Random(self.seed)
        self._xids = [x for x, _ in self.mix]
        self._weights = [w for _, w in self.mix]

    def next_gap(self) -> float:
        """Seconds to the next random fault (infinite when the rate is 0)."""
        return self._rng.expovariate(self.rate_per_s) if self.rate_per_s > 0 else float("inf")

    def draw(self) -> tuple[int, int, int]:
        """(node index, GPU index, XID) of a random fault."""
        node = self._rng.randrange(self.nodes)
        gpu = self._rng.randrange(self.gpus)
        xid = self._rng.choices(self._xids, self._weights)[0]
        return node, gpu, xid
