"""XIDs reported twice, by NVML's event and the kernel's line: the GPUs' PCI addresses both paths are matched by.

``rt.xids`` (an :class:`~myolo.agent.kernlog.dedup.XidDedup`) pairs the two paths' reports one to one.
"""

from __future__ import annotations

from myolo.agent.daemon.runtime import Runtime
from myolo.agent.gpu.backend import GpuEvent
from myolo.agent.kernlog.parse import pci_key
from myolo.agent.kernlog.watch import GpuAddresses


def gpu_addresses(rt: Runtime) -> GpuAddresses:
    """The node's GPUs by PCI address, from the last sample (empty before the first)."""
    sample = rt.sampler.last_sample
    out: dict[str, tuple[int, str | None]] = {}
    for g in sample.gpus if sample is not None else []:
        key = pci_key(g.pci_bus_id) if g.pci_bus_id else None
        if key is not None:
            out[key] = (g.index, g.uuid)
    return out


def nvml_echo(rt: Runtime, event: GpuEvent) -> bool:
    """True when ``event`` (from the backend) is an XID the kernel log already reported: drop it."""
    if event.kind != "xid" or event.xid is None or event.gpu_index is None:
        return False
    bus = next((b for b, (i, _) in gpu_addresses(rt).items() if i == event.gpu_index), None)
    return not rt.xids.first("nvml", bus, event.xid, rt.clock.now())
