"""The real backend: NVIDIA's NVML through ``nvidia-ml-py`` (``import pynvml``).

The module is looked up through the ``pynvml`` attribute of this module (or passed in), so tests can put
a test double in its place and exercise every wrapping, absence and isolation rule without a GPU.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pynvml
import structlog

from myolo.agent.gpu.backend import BackendName, GpuBackendError, GpuEvent, format_cuda_version
from myolo.agent.gpu.bridge import EventBridge, resolve_loop
from myolo.agent.gpu.nvml_calls import GpuLost, NvmlCaller, text
from myolo.agent.gpu.nvml_events import NvmlEventThread
from myolo.agent.gpu.nvml_read import DeviceInfo, discover_nvlinks, read_device
from myolo.common.clock import Clock, SystemClock
from myolo.events.payloads import GpuReading

log = structlog.get_logger("myolo.agent.gpu")

_NO_DRIVER_HINT = (
    "no NVIDIA driver/NVML on this machine ({err}). Install the NVIDIA driver, or run the agent with "
    "--simulate-gpus N (config key simulate_gpus = N) to use simulated GPUs."
)
_PROCESS_NAME_CACHE = 4096


class NvmlBackend:
    """Reads every GPU with NVML. ``lib`` defaults to the ``pynvml`` module (looked up at ``open``)."""

    name: BackendName = "nvml"

    def __init__(
        self, clock: Clock | None = None, lib: Any = None, process_names: bool = True, event_wait_ms: int = 500
    ) -> None:
        self.clock = clock or SystemClock()
        self.event_wait_ms = event_wait_ms
        self._lib_override = lib
        self.lib: Any = None
        self.caller: NvmlCaller | None = None
        self.devices: list[DeviceInfo | None] = []
        self.failed_open: dict[int, str] = {}
        self._driver: str | None = None
        self._cuda: str | None = None
        self._process_names: dict[int, str] | None = {} if process_names else None
        self._events: NvmlEventThread | None = None
        self._bridge: EventBridge | None = None

    # -- lifecycle -------------------------------------------------------------------------------------
    def open(self) -> None:
        lib = self._lib_override if self._lib_override is not None else pynvml
        try:
            lib.nvmlInit()
        except Exception as e:
            raise GpuBackendError(_NO_DRIVER_HINT.format(err=f"{type(e).__name__}: {e}")) from e
        self.lib = lib
        self.caller = NvmlCaller(lib)
        try:
            count = int(lib.nvmlDeviceGetCount())
        except Exception as e:
            lib.nvmlShutdown()
            raise GpuBackendError(f"NVML initialised but cannot count GPUs ({e}); check the driver") from e
        self.devices = [self._open_device(i) for i in range(count)]
        self._driver = self._version(lambda: text(lib.nvmlSystemGetDriverVersion()))
        self._cuda = self._version(
            lambda: format_cuda_version(int(lib.nvmlSystemGetCudaDriverVersion_v2())),
            lambda: format_cuda_version(int(lib.nvmlSystemGetCudaDriverVersion())),
        )

    def _open_device(self, i: int) -> DeviceInfo | None:
        """Handle, uuid and name of GPU ``i``; a GPU that fails here is remembered and reported as failed
        in every reading, while the other GPUs carry on."""
        lib = self.lib
        try:
            h = lib.nvmlDeviceGetHandleByIndex(i)
            uuid = text(lib.nvmlDeviceGetUUID(h))
            name = text(lib.nvmlDeviceGetName(h))
            pci_bus_id = self.caller.get(i, "pci_info", lambda: text(lib.nvmlDeviceGetPciInfo(h).busId))
            minor_number = self.caller.get(i, "minor_number", lambda: int(lib.nvmlDeviceGetMinorNumber(h)))
        except Exception as e:
            self.failed_open[i] = f"{type(e).__name__}: {e}"
            log.error("nvml: gpu cannot be opened", gpu=i, error=str(e))
            return None
        return DeviceInfo(
            index=i,
            handle=h,
            uuid=uuid,
            name=name,
            nvlinks=discover_nvlinks(lib, self.caller, i, h),
            pci_bus_id=pci_bus_id,
            minor_number=minor_number,
        )

    def _version(self, *variants: Any) -> str | None:
        for v in variants:
            try:
                return v()
            except Exception:
                continue
        return None

    def close(self) -> None:
        self.stop_events()
        if self.lib is not None:
            try:
                self.lib.nvmlShutdown()
            except Exception as e:
                log.warning("nvml: shutdown failed", error=str(e))
            self.lib = None

    # -- readings --------------------------------------------------------------------------------------
    def device_count(self) -> int:
        return len(self.devices)

    def driver_version(self) -> str | None:
        return self._driver

    def cuda_version(self) -> str | None:
        return self._cuda

    def read_all(self) -> list[GpuReading]:
        if self.lib is None or self.caller is None:
            raise GpuBackendError("NvmlBackend.read_all() before open(): call open() first")
        out = []
        names = self._process_names
        if names is not None and len(names) > _PROCESS_NAME_CACHE:
            names.clear()
        for i, dev in enumerate(self.devices):
            if dev is None:
                out.append(_failed(i, f"GPU-UNKNOWN-{i}", "unknown", f"cannot open gpu: {self.failed_open[i]}"))
                continue
            try:
                out.append(read_device(self.lib, self.caller, dev, names))
            except GpuLost as e:
                out.append(_failed(i, dev.uuid, dev.name, f"gpu lost: {e}", dev))
            except Exception as e:  # a bug or an odd driver on one GPU must not cost the others
                log.exception("nvml: reading a gpu failed", gpu=i)
                out.append(_failed(i, dev.uuid, dev.name, f"read failed: {type(e).__name__}: {e}", dev))
        return out

    # -- events ----------------------------------------------------------------------------------------
    def start_events(self, loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Queue[GpuEvent]:
        if self._bridge is not None:
            return self._bridge.queue
        if self.lib is None:
            raise GpuBackendError("NvmlBackend.start_events() before open(): call open() first")
        self._bridge = EventBridge(resolve_loop(loop))
        devices = [d for d in self.devices if d is not None]
        self._events = NvmlEventThread(self.lib, devices, self._bridge, self.clock.now, self.event_wait_ms)
        self._events.start()
        return self._bridge.queue

    def stop_events(self) -> None:
        if self._events is not None:
            self._events.stop()
            self._events = None
        if self._bridge is not None:
            self._bridge.close()
            self._bridge = None


def _failed(index: int, uuid: str, name: str, reason: str, dev: DeviceInfo | None = None) -> GpuReading:
    """A failed GPU's reading: its identity (as far as it was read at open) and why it failed."""
    return GpuReading(
        index=index,
        uuid=uuid,
        name=name,
        pci_bus_id=dev.pci_bus_id if dev else None,
        minor_number=dev.minor_number if dev else None,
        health="fail",
        health_reasons=[reason],
    )
