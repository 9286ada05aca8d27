"""GPU backends (NVML and simulated), their event hook, and rendering of samples."""

from agent.gpu.backend import GpuBackend, GpuBackendError, GpuEvent
from agent.gpu.factory import make_backend
from agent.gpu.nvml import NvmlBackend
from agent.gpu.sim import SimBackend

__all__ = ["GpuBackend", "GpuBackendError", "GpuEvent", "NvmlBackend", "SimBackend", "make_backend"]
