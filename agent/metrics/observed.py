"""What the metrics show beside the sample, kept from the payloads the agent publishes: the last XID and a
count per code of each GPU, the leak detector's last report per GPU, the last bandwidth probe.

Fed by :attr:`myolo.agent.publish.Publisher.observers`, so it sees exactly what Kafka gets, and bounded: a GPU keeps at
most :data:`MAX_XID_CODES` codes (XIDs are the driver's small integers; the cap only guards against a broken one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from myolo.agent.health.xid import xid_description
from myolo.events.payloads import BandwidthReport, LeakReport, NodeFault, Payload

MAX_XID_CODES = 256


@dataclass(frozen=True)
class LastXid:
    code: int
    message: str


@dataclass(frozen=True)
class LastProbe:
    report: BandwidthReport
    monotonic: float  # when it was published


@dataclass
class Observed:
    """Updated by :meth:`observe` on the event loop; read by the renderers on the same loop or, for the
    OpenTelemetry reader's thread, through atomic dict reads of immutable values."""

    clock_monotonic: Callable[[], float]  # the agent's clock
    xid_last: dict[int, LastXid] = field(default_factory=dict)
    xid_counts: dict[int, dict[int, int]] = field(default_factory=dict)
    leak: dict[int, LeakReport] = field(default_factory=dict)
    probe: LastProbe | None = None

    def observe(self, payload: Payload) -> None:
        if isinstance(payload, NodeFault):
            self._fault(payload)
        elif isinstance(payload, LeakReport):
            if payload.subject == "gpu" and payload.gpu_index is not None:
                self.leak[payload.gpu_index] = payload
        elif isinstance(payload, BandwidthReport):
            self.probe = LastProbe(payload, self.clock_monotonic())

    def _fault(self, fault: NodeFault) -> None:
        if fault.kind != "xid" or fault.xid is None or fault.gpu_index is None:
            return
        counts = self.xid_counts.setdefault(fault.gpu_index, {})
        if fault.xid in counts or len(counts) < MAX_XID_CODES:
            counts[fault.xid] = counts.get(fault.xid, 0) + 1
        self.xid_last[fault.gpu_index] = LastXid(fault.xid, xid_description(fault.xid))
