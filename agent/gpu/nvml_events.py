"""XID and ECC events from NVML's event set, in a dedicated thread, handed to asyncio at once.

``nvmlEventSetWait`` blocks the calling thread until an event or the timeout, so it cannot run on the
event loop. The thread waits with a short timeout so that :meth:`NvmlEventThread.stop` is prompt, and
every event goes through :class:`~myolo.agent.gpu.bridge.EventBridge` to the loop's queue.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import structlog

from myolo.agent.gpu.backend import GpuEvent, GpuEventKind
from myolo.agent.gpu.bridge import EventBridge
from myolo.agent.gpu.nvml_calls import text
from myolo.agent.gpu.nvml_read import DeviceInfo

log = structlog.get_logger("myolo.agent.gpu")

# NVML event type bits (nvml.h) we listen for, and how the agent names them.
EVENT_KINDS: dict[int, GpuEventKind] = {
    0x0000000000000008: "xid",
    0x0000000000000002: "ecc_dbe",
    0x0000000000000001: "ecc_sbe",
    0x0000000000000400: "retirement",
    0x0000000000000800: "retirement_failure",
    0x0000000000004000: "gpu_unavailable",
}


class NvmlEventThread:
    """Owns one NVML event set registered on every GPU that supports any of :data:`EVENT_KINDS`."""

    def __init__(
        self,
        lib: Any,
        devices: list[DeviceInfo],
        bridge: EventBridge,
        now: Callable[[], float],
        wait_ms: int = 500,
    ) -> None:
        self.lib = lib
        self.devices = devices
        self.bridge = bridge
        self.now = now
        self.wait_ms = wait_ms
        self.registered: dict[int, int] = {}  # gpu index -> event mask
        self.delivered = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._set: Any = None
        self._by_uuid = {d.uuid: d.index for d in devices}

    def start(self) -> None:
        self._set = self.lib.nvmlEventSetCreate()
        wanted = 0
        for bit in EVENT_KINDS:
            wanted |= bit
        for d in self.devices:
            try:
                mask = int(self.lib.nvmlDeviceGetSupportedEventTypes(d.handle)) & wanted
                if mask:
                    self.lib.nvmlDeviceRegisterEvents(d.handle, mask, self._set)
                    self.registered[d.index] = mask
            except Exception as e:  # one GPU without events must not stop the others
                log.warning("nvml: gpu cannot deliver XID/ECC events", gpu=d.index, error=str(e))
        self._thread = threading.Thread(target=self._run, name="nvml-events", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the thread to end, wait for it (at most one ``wait_ms`` plus ``timeout``), free the set."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout + self.wait_ms / 1000.0)
            if self._thread.is_alive():
                log.warning("nvml: event thread did not stop in time; leaving the event set allocated")
                return
            self._thread = None
        if self._set is not None:
            try:
                self.lib.nvmlEventSetFree(self._set)
            except Exception as e:
                log.warning("nvml: freeing the event set failed", error=str(e))
            self._set = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        timeout_cls = getattr(self.lib, "NVMLError_Timeout", None)
        failures = 0
        while not self._stop.is_set():
            try:
                data = self.lib.nvmlEventSetWait(self._set, self.wait_ms)
            except Exception as e:
                if timeout_cls is not None and isinstance(e, timeout_cls):
                    continue
                failures += 1
                log.warning("nvml: event wait failed; retrying", error=str(e))
                if failures >= 100 or self._stop.wait(min(5.0, 0.05 * failures)):
                    return
                continue
            failures = 0
            event = self._convert(data)
            if event is not None:
                self.delivered += 1
                if not self.bridge.put(event):
                    return

    def _convert(self, data: Any) -> GpuEvent | None:
        kind = EVENT_KINDS.get(int(data.eventType))
        if kind is None:
            return None
        uuid: str | None = None
        try:
            uuid = text(self.lib.nvmlDeviceGetUUID(data.device))
        except Exception:
            uuid = None
        index = self._by_uuid.get(uuid) if uuid is not None else None
        xid = int(data.eventData) if kind == "xid" else None
        return GpuEvent(gpu_index=index, gpu_uuid=uuid, kind=kind, time=self.now(), xid=xid)
