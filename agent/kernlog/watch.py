"""Kernel log lines to the GPU events NVML's path produces, minus the XIDs NVML already reported.

A line that reports an XID becomes a :class:`~myolo.agent.gpu.backend.GpuEvent` of kind ``xid`` on the GPU the PCI
address names (``gpus`` maps addresses, in :func:`~myolo.agent.kernlog.parse.pci_key` form, to index and UUID; an
address the agent does not know keeps the GPU unnamed), with the kernel's line as its ``detail``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import structlog

from myolo.agent.gpu.backend import GpuEvent
from myolo.agent.kernlog.dedup import XidDedup
from myolo.agent.kernlog.parse import parse_line

log = structlog.get_logger("myolo.agent.kernlog")
GpuAddresses = Mapping[str, tuple[int, str | None]]  # pci_key -> (index, uuid)


class KernelXidWatcher:
    def __init__(
        self, dedup: XidDedup, gpus: Callable[[], GpuAddresses], now: Callable[[], float], simulated: bool = False
    ) -> None:
        self.dedup, self.gpus, self.now, self.simulated = dedup, gpus, now, simulated
        self.lines = 0
        self.xids = 0

    def on_line(self, line: bytes | str) -> GpuEvent | None:
        """The event of one line: None for a line that is not an XID, or an XID NVML reported already."""
        self.lines += 1
        try:
            found = parse_line(line)
        except Exception:  # a parser bug must not cost the agent its kernel log
            log.exception("kernel log line not parsed", line=repr(line[:200]))
            return None
        if found is None:
            return None
        self.xids += 1
        if not self.dedup.first("kernel", found.bus, found.xid, self.now()):
            log.info("kernel XID already reported by NVML", xid=found.xid, bus=found.bus)
            return None
        index, uuid = self.gpus().get(found.bus, (None, None))
        return GpuEvent(
            gpu_index=index,
            gpu_uuid=uuid,
            kind="xid",
            time=self.now(),
            xid=found.xid,
            simulated=self.simulated,
            detail=found.line,
        )
