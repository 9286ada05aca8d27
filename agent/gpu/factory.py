"""Choose the backend from configuration: simulated GPUs when asked, NVML otherwise."""

from __future__ import annotations

from myolo.agent.gpu.backend import GpuBackend
from myolo.agent.gpu.nvml import NvmlBackend
from myolo.agent.gpu.sim import SimBackend
from myolo.agent.gpu.sim_model import profile_from_name
from myolo.common.clock import Clock


def make_backend(
    simulate_gpus: int | None,
    clock: Clock | None = None,
    *,
    seed: int = 0,
    profile: str = "training",
    node_tag: str = "",
) -> GpuBackend:
    """``simulate_gpus`` = N > 0 gives N simulated GPUs; None or 0 gives NVML. Not opened yet."""
    if simulate_gpus:
        return SimBackend(simulate_gpus, clock, seed=seed, profile=profile_from_name(profile), node_tag=node_tag)
    return NvmlBackend(clock)
