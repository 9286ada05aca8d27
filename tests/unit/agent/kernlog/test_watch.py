"""Lines to GPU events: the GPU named by its PCI address, the kernel line kept, NVML's XIDs not repeated; a file
source read on a simulated clock (no root, no /dev/kmsg)."""

from __future__ import annotations

import asyncio
import io

from myolo.agent.kernlog.dedup import XidDedup
from myolo.agent.kernlog.lines import LineSplitter
from myolo.agent.kernlog.source import follow
from myolo.agent.kernlog.watch import KernelXidWatcher
from myolo.common.clock import SimClock

LINE = b"[ 9121.337701] NVRM: Xid (PCI:0000:3b:00): 79, pid=1927, name=python3, GPU has fallen off the bus."
GPUS = {"0000:3b:00": (3, "GPU-3"), "0000:86:00": (4, "GPU-4")}


def watcher(dedup: XidDedup, clock: SimClock) -> KernelXidWatcher:
    return KernelXidWatcher(dedup, lambda: GPUS, clock.now)


def test_an_xid_line_is_the_gpus_xid_event_with_the_kernel_line() -> None:
    clock = SimClock()
    event = watcher(XidDedup(), clock).on_line(LINE)
    assert event is not None
    assert (event.kind, event.xid, event.gpu_index, event.gpu_uuid) == ("xid", 79, 3, "GPU-3")
    assert event.detail is not None and event.detail.startswith("NVRM: Xid (PCI:0000:3b:00): 79")
    assert event.time == clock.now() and not event.simulated


def test_an_xid_nvml_reported_is_not_reported_again() -> None:
    clock, dedup = SimClock(), XidDedup(window_s=30)
    assert dedup.first("nvml", "0000:3b:00", 79, clock.now())
    assert watcher(dedup, clock).on_line(LINE) is None


def test_an_unknown_gpu_keeps_its_address_in_the_line() -> None:
    event = watcher(XidDedup(), SimClock()).on_line(LINE.replace(b"3b:00", b"c1:00"))
    assert event is not None and event.gpu_index is None and "c1:00" in (event.detail or "")


def test_other_lines_are_no_event() -> None:
    w = watcher(XidDedup(), SimClock())
    assert w.on_line(b"usb 1-1: new high-speed USB device") is None
    assert w.on_line(b"\xff" * 100_000) is None
    assert w.lines == 2 and w.xids == 0


async def test_a_file_like_source_is_read_in_chunks_into_events() -> None:
    clock = SimClock()
    data = b"noise\n" + LINE + b"\n" + b"x" * 50_000 + b"\n" + LINE.replace(b"3b:00", b"86:00") + b"\n"
    w, splitter, events = watcher(XidDedup(), clock), LineSplitter(), []
    async for chunk in follow(io.BytesIO(data), clock, 1.0, until_eof=True):
        events += [e for line in splitter.feed(chunk) if (e := w.on_line(line)) is not None]
    assert [(e.xid, e.gpu_index) for e in events] == [(79, 3), (79, 4)]
    assert splitter.cut == 1


async def test_a_flood_of_records_lets_the_agents_other_tasks_run() -> None:
    clock, ticks = SimClock(), []

    async def other_task() -> None:
        while True:
            ticks.append(1)
            await asyncio.sleep(0)

    class Kmsg(io.RawIOBase):
        """One record per read, as /dev/kmsg gives them."""

        def __init__(self, n: int) -> None:
            self.left = n

        def read(self, size: int = -1) -> bytes:
            self.left -= 1
            return b"6,1,1,-;usb 1-1: reset\n" if self.left >= 0 else b""

    other = asyncio.create_task(other_task())
    await asyncio.sleep(0)
    before = len(ticks)
    chunks = [c async for c in follow(Kmsg(1000), clock, 1.0, until_eof=True)]
    other.cancel()
    assert len(chunks) == 1000 and len(ticks) - before >= 900
