"""What every GPU backend offers the agent: the real one (NVML) and the simulated one look the same.

The daemon, ``myolo-agent sample`` and the health rules only ever see this protocol, so every code path
above the backend is exercised by the simulator in tests exactly as it runs on a real node.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from myolo.events.payloads import GpuReading

BackendName = Literal["nvml", "sim"]
GpuEventKind = Literal["xid", "ecc_dbe", "ecc_sbe", "retirement", "retirement_failure", "gpu_unavailable"]


class GpuBackendError(RuntimeError):
    """The backend cannot be used at all (no driver, no library); the message says what to do instead."""


@dataclass(frozen=True, slots=True)
class GpuEvent:
    """A fault the driver reported asynchronously (not at a sample tick): an XID or an ECC event.

    ``time`` is the agent clock's wall time when the event was taken off the driver's queue, so that a
    fault is published with the moment it was seen, not the moment the next sample happened.
    """

    gpu_index: int | None
    gpu_uuid: str | None
    kind: GpuEventKind
    time: float
    xid: int | None = None
    simulated: bool = False
    detail: str | None = None


@runtime_checkable
class GpuBackend(Protocol):
    """One node's GPUs. ``open`` before anything else; ``close`` is idempotent and stops the event hook."""

    name: BackendName

    def open(self) -> None:
        """Initialise the driver/simulator; raise :class:`GpuBackendError` with a remedy when impossible."""

    def close(self) -> None:
        """Stop event delivery and release the driver."""

    def device_count(self) -> int:
        """Number of GPUs seen at ``open``."""

    def read_all(self) -> list[GpuReading]:
        """One reading per GPU, in index order. Unsupported fields are ``None``; a GPU that cannot be read
        still yields a reading (identity only) whose ``health`` is ``fail`` with the reason."""

    def driver_version(self) -> str | None:
        """Kernel driver version, e.g. ``"570.124.06"``."""

    def cuda_version(self) -> str | None:
        """Highest CUDA version the driver supports, e.g. ``"12.8"``."""

    def start_events(self, loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Queue[GpuEvent]:
        """Begin delivering XID/ECC events to an asyncio queue owned by ``loop`` (the running loop when
        omitted). Calling it again returns the same queue."""

    def stop_events(self) -> None:
        """Stop event delivery (joins any driver thread). Safe to call when not started."""


def format_cuda_version(v: int) -> str:
    """NVML encodes CUDA 12.8 as 12080; operators read ``12.8``."""
    return f"{v // 1000}.{(v % 1000) // 10}"
