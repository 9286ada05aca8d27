"""Wiring of the kernel log's XIDs into the running agent: read, pair with NVML's, publish as faults.

The task never ends on its own (the daemon treats a producing loop that ends as a bug): a kernel log it may not
read is logged once and the task idles; a line it cannot use is skipped.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import structlog

from myolo.agent.daemon.loops import publish_fault
from myolo.agent.daemon.runtime import Runtime
from myolo.agent.daemon.xid_pairing import gpu_addresses
from myolo.agent.health import fault_from_event
from myolo.agent.kernlog.lines import LineSplitter
from myolo.agent.kernlog.parse import parse_line, summary
from myolo.agent.kernlog.source import follow, journal, open_kmsg
from myolo.agent.kernlog.watch import KernelXidWatcher

log = structlog.get_logger("myolo.agent.kernlog")


def kernel_source(rt: Runtime) -> AsyncIterator[bytes] | None:
    """The configured source's chunks, or None (off, or a kernel log this agent may not read)."""
    cfg = rt.cfg.kernel_log
    if cfg.source == "off" or (cfg.source == "auto" and rt.backend.name != "nvml"):
        return None
    if cfg.source == "journal":
        return journal(cfg.journal_command, rt.clock)
    if cfg.source == "auto" and not os.access(cfg.path, os.R_OK):
        log.info("kernel log not readable: XIDs come from NVML alone", path=cfg.path)
        return None
    try:
        f = open_kmsg(cfg.path, cfg.from_start)
    except OSError as exc:
        log.warning("kernel log cannot be opened: XIDs come from NVML alone", path=cfg.path, error=str(exc))
        return None
    return follow(f, rt.clock, cfg.poll_interval_s)


async def kernel_xid_task(rt: Runtime, source: AsyncIterator[bytes] | None = None) -> None:
    """Publish every XID of the kernel log that NVML did not report; idles when there is nothing to read."""
    chunks = source if source is not None else kernel_source(rt)
    if chunks is not None:
        watcher = KernelXidWatcher(rt.xids, lambda: gpu_addresses(rt), rt.clock.now, rt.backend.name == "sim")
        splitter = LineSplitter()
        try:
            async for chunk in chunks:
                for line in splitter.feed(chunk):
                    event = watcher.on_line(line)
                    if event is not None:
                        fault = fault_from_event(event, rt.cfg.node_id, rt.health.on_event(event))
                        # who ran and what the driver said, in the reasons too: what `describe node` shows of a
                        # fault (the whole line is its message)
                        found = parse_line(event.detail or "")
                        fault.reasons = [*fault.reasons, *([summary(found)] if found else [])]
                        publish_fault(rt, fault)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("kernel log reading stopped: XIDs come from NVML alone")
    await asyncio.Future()  # idle until cancelled
