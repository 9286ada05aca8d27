"""GPU backends (NVML and simulated), their event hook, and rendering of samples."""

from myolo.agent.gpu.backend import GpuBackend, GpuBackendError, GpuEvent
from myolo.agent.gpu.factory import make_backend
from myolo.agent.gpu.nvml import NvmlBackend
from myolo.agent.gpu.sim import SimBackend

__all__ = ["GpuBackend", "GpuBackendError", "GpuEvent", "NvmlBackend", "SimBackend", "make_backend"]
