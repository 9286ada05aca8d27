"""The small amount of memory health needs: the previous reading per GPU, and the XID/ECC events seen.

Fail-class events are sticky until :meth:`HealthState.clear` (a GPU reset or an operator's word): a GPU
that fell off the bus is not healthy again because one later reading looked fine. Warn-class events hold
for ``warn_hold_s`` after their last occurrence. Repeats are counted, not collapsed into "the last XID".
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from myolo.agent.gpu.backend import GpuEvent
from myolo.agent.health.model import Finding, summarise
from myolo.agent.health.rules import gpu_findings, pcie_findings
from myolo.agent.health.xid import classify_xid
from myolo.common.clock import Clock
from myolo.events.payloads import GpuReading, NodeSample
from myolo.events.payloads.common import Health

NODE = -1  # key for events whose GPU the driver did not name

_EVENT_FINDINGS: dict[str, Finding] = {
    "ecc_dbe": Finding("fail", "double-bit ECC error event"),
    "ecc_sbe": Finding("ok", "single-bit ECC error event"),
    "retirement": Finding("warn", "page retirement event"),
    "retirement_failure": Finding("fail", "page retirement failure event"),
    "gpu_unavailable": Finding("fail", "GPU unavailable event"),
}


def classify_event(event: GpuEvent) -> Finding:
    """Level and reason of one driver event (an XID by its class; ECC and others by kind)."""
    if event.kind == "xid" and event.xid is not None:
        return classify_xid(event.xid)
    return _EVENT_FINDINGS.get(event.kind, Finding("warn", f"{event.kind} event"))


@dataclass(frozen=True)
class NodeHealth:
    """A node's verdict and its GPUs' readings with their own verdicts filled in."""

    level: Health
    reasons: list[str]
    gpus: list[GpuReading]


@dataclass
class _Seen:
    finding: Finding
    count: int
    last: float  # clock.monotonic()


class HealthState:
    """Feed it every sample (:meth:`evaluate`) and every event (:meth:`on_event`)."""

    def __init__(self, clock: Clock, warn_hold_s: float = 300.0, pcie_window_s: float = 60.0) -> None:
        self.clock = clock
        self.warn_hold_s = warn_hold_s
        self.pcie_window_s = pcie_window_s
        self._pcie_base: dict[int, tuple[int | None, float]] = {}
        self._pcie_verdict: dict[int, list[Finding]] = {}
        self._prev: dict[int, tuple[GpuReading, float]] = {}
        self._events: dict[int, dict[str, _Seen]] = {}
        self._gpu_count: int | None = None

    def on_event(self, event: GpuEvent) -> Finding:
        """Remember ``event`` for the GPU's health; returns its finding (for the fault published at once)."""
        finding = classify_event(event)
        if finding.level != "ok":
            key = f"xid:{event.xid}" if event.kind == "xid" else event.kind
            gpu = event.gpu_index if event.gpu_index is not None else NODE
            seen = self._events.setdefault(gpu, {})
            if key in seen:
                seen[key].count += 1
                seen[key].last = self.clock.monotonic()
                seen[key].finding = finding
            else:
                seen[key] = _Seen(finding, 1, self.clock.monotonic())
        return finding

    def clear(self, gpu: int | None = None) -> None:
        """Forget remembered events (of one GPU, or all): after a reset or an operator's acknowledgement."""
        if gpu is None:
            self._events.clear()
            self._gpu_count = None
        else:
            self._events.pop(gpu, None)

    def event_findings(self, gpu: int) -> list[Finding]:
        now = self.clock.monotonic()
        seen = self._events.get(gpu, {})
        out = []
        for key in list(seen):
            s = seen[key]
            if s.finding.level == "warn" and now - s.last > self.warn_hold_s:
                del seen[key]
                continue
            times = f", seen {s.count} times" if s.count > 1 else ""
            out.append(Finding(s.finding.level, f"{s.finding.reason}{times}"))
        return out

    def gpu_findings(self, reading: GpuReading) -> list[Finding]:
        """Every rule and remembered event for one reading, which becomes the baseline the next reading's
        growth is measured against: call once per fresh reading."""
        now = self.clock.monotonic()
        i = reading.index
        prev_entry = self._prev.get(i)
        prev = prev_entry[0] if prev_entry is not None and prev_entry[0].uuid == reading.uuid else None
        self._prev[i] = (reading, now)
        return [*gpu_findings(reading, prev), *self._pcie(reading, prev is not None, now), *self.event_findings(i)]

    def _pcie(self, reading: GpuReading, same_gpu: bool, now: float) -> list[Finding]:
        """PCIe replays per minute over windows of at least ``pcie_window_s``; a verdict holds until the
        next window closes."""
        i = reading.index
        base = self._pcie_base.get(i)
        if base is None or not same_gpu:
            self._pcie_base[i] = (reading.pcie_replay_counter, now)
            self._pcie_verdict[i] = []
            return []
        window = now - base[1]
        if window >= self.pcie_window_s:
            self._pcie_verdict[i] = pcie_findings(reading, base[0], window, self.pcie_window_s)
            self._pcie_base[i] = (reading.pcie_replay_counter, now)
        return self._pcie_verdict.get(i, [])

    def judge(self, reading: GpuReading) -> tuple[GpuReading, list[Finding]]:
        """A copy of ``reading`` with ``health``/``health_reasons`` filled in, and the findings. The input
        is left as it was, so a reading the backend flagged keeps meaning what the backend said."""
        found = self.gpu_findings(reading)
        level, reasons = summarise(found)
        return msgspec.structs.replace(reading, health=level, health_reasons=reasons), found

    def evaluate(self, readings: list[GpuReading]) -> NodeHealth:
        """Per-GPU health for every reading, then the node's: its worst GPU, every reason prefixed with the
        GPU, plus node-wide findings (events of no known GPU, GPUs that disappeared)."""
        judged: list[GpuReading] = []
        node: list[Finding] = []
        for r in readings:
            out, found = self.judge(r)
            judged.append(out)
            node += [Finding(f.level, f"gpu {r.index}: {f.reason}") for f in found]
        node += self.event_findings(NODE)
        if self._gpu_count is not None and len(readings) < self._gpu_count:
            node.append(Finding("fail", f"gpu count fell from {self._gpu_count} to {len(readings)}"))
        else:
            self._gpu_count = len(readings)
        level, reasons = summarise(node)
        return NodeHealth(level, reasons, judged)

    def evaluate_sample(self, sample: NodeSample) -> NodeSample:
        """The sample with ``health``/``health_reasons`` of the node and of each GPU filled in."""
        h = self.evaluate(sample.gpus)
        return msgspec.structs.replace(sample, health=h.level, health_reasons=h.reasons, gpus=h.gpus)
