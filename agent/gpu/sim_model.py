"""The physics of one simulated GPU: cheap, deterministic (seeded), and correlated the way real ones are.

Utilisation follows a load profile with a short lag; power follows utilisation; temperature follows power
with a thermal time constant of tens of seconds; memory is the sum of the simulated processes. Faults
(:class:`~myolo.agent.gpu.sim_faults.GpuFaults`) bend these: a throttle lowers clocks, caps power or heats the
die, and grows violation time; a leak grows one process. Each step is a handful of float operations, so
eight GPUs at 1 Hz cost far less than the agent that reads them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from myolo.agent.gpu.sim_faults import GpuFaults

GiB = 1 << 30
MiB = 1 << 20

LoadProfile = Callable[[float], float]  # seconds since start -> target utilisation 0..1


@dataclass(frozen=True)
class GpuSpec:
    """An H200 SXM, near enough: the numbers a dashboard would show."""

    name: str = "H200-sim"
    mem_total: int = 143_771 * MiB
    mem_reserved: int = 535 * MiB
    driver_overhead: int = 512 * MiB
    tdp_w: float = 700.0
    idle_w: float = 75.0
    power_cap_w: float = 450.0  # what a power throttle holds the board to
    sm_max_mhz: int = 1980
    sm_idle_mhz: int = 345
    mem_mhz: int = 3201
    ambient_c: float = 27.0
    c_per_w: float = 0.075  # steady-state degrees above ambient per watt
    pcie_gen: int = 5
    pcie_width: int = 16
    nvlinks: int = 18
    nvlink_bytes_s: float = 160e9  # traffic at full utilisation
    pcie_bytes_s: float = 3e9


def training_profile(t: float) -> float:
    """An hour of data-parallel training: a 1-minute checkpoint, 2 minutes of evaluation at half load,
    the rest busy with small step-to-step jitter."""
    m = (t % 3600.0) / 60.0
    if m < 1.0:
        return 0.08
    if 29.0 <= m < 31.0:
        return 0.45
    return 0.96


def idle_profile(t: float) -> float:
    return 0.0


def constant_profile(level: float) -> LoadProfile:
    return lambda t: level


def profile_from_name(spec: str) -> LoadProfile:
    """``training``, ``idle`` or ``constant:0.6`` (a fraction), for configs and the CLI."""
    if spec == "training":
        return training_profile
    if spec == "idle":
        return idle_profile
    if spec.startswith("constant:"):
        try:
            level = float(spec.split(":", 1)[1])
        except ValueError:
            level = -1.0
        if 0.0 <= level <= 1.0:
            return constant_profile(level)
    raise ValueError(f"load profile {spec!r}: expected 'training', 'idle' or 'constant:<0..1>'")


@dataclass
class SimProcess:
    pid: int
    base: int  # bytes the job needs
    leaked: float = 0.0  # bytes grown by an injected leak
    name: str = "python"

    @property
    def used(self) -> int:
        return self.base + int(self.leaked)


@dataclass
class GpuState:
    """Everything that evolves. Counters are cumulative like the hardware's."""

    index: int
    util: float = 0.0  # fraction, lagged
    power_w: float = 0.0
    temp_c: float = 30.0
    energy_j: float = 0.0
    viol_power_ns: int = 0
    viol_thermal_ns: int = 0
    ecc_corr_vol: int = 0
    ecc_unc_vol: int = 0
    ecc_corr_agg: int = 0
    ecc_unc_agg: int = 0
    remap_corr: int = 0
    remap_unc: int = 0
    remap_pending: bool = False
    remap_failure: bool = False
    nvlink_tx: float = 0.0
    nvlink_rx: float = 0.0
    processes: list[SimProcess] = field(default_factory=list)
    faults: GpuFaults = field(default_factory=GpuFaults)
    # what the last step showed (noise included), read by the backend
    util_obs: float = 0.0
    sm_mhz: int = 0
    reasons: list[str] = field(default_factory=list)


def _lag(current: float, target: float, dt: float, tau: float) -> float:
    """First-order response: how a quantity with time constant ``tau`` approaches ``target``."""
    return target + (current - target) * math.exp(-dt / tau) if dt > 0 else current


def power_target(spec: GpuSpec, util: float, faults: GpuFaults) -> float:
    p = spec.idle_w + (spec.tdp_w - spec.idle_w) * util**0.9
    if faults.throttle == "power":
        p = min(p, spec.power_cap_w)
    elif faults.throttle == "thermal":
        p *= 0.8  # lower clocks draw less
    return p


def temp_target(spec: GpuSpec, power: float, faults: GpuFaults) -> float:
    t = spec.ambient_c + spec.c_per_w * power
    if faults.throttle == "thermal":
        t += 25.0  # as if cooling failed: the die runs hot despite lower clocks
    return t


def settle(s: GpuState, spec: GpuSpec, load: float) -> None:
    """Start a GPU at the steady state of its initial load, so a fresh agent does not see a warm-up."""
    s.util = load
    s.power_w = power_target(spec, load, s.faults)
    s.temp_c = temp_target(spec, s.power_w, s.faults)


def step(s: GpuState, spec: GpuSpec, load: float, dt: float, rng: random.Random) -> None:
    """Advance one GPU by ``dt`` seconds towards target utilisation ``load``."""
    f = s.faults
    target = f.util_override if f.util_override is not None else load
    s.util = _lag(s.util, target, dt, 2.0)
    busy = s.util > 0.01
    s.util_obs = min(1.0, max(0.0, s.util + (rng.gauss(0.0, 0.015) if busy else 0.0)))

    old_power = s.power_w
    p_target = power_target(spec, s.util, f)
    s.power_w = max(spec.idle_w * 0.9, _lag(s.power_w, p_target, dt, 0.5) + rng.gauss(0.0, 4.0))
    if f.throttle == "power":
        s.power_w = min(s.power_w, spec.power_cap_w)
    s.energy_j += 0.5 * (old_power + s.power_w) * dt
    s.temp_c = _lag(s.temp_c, temp_target(spec, s.power_w, f), dt, 45.0)

    reasons = []
    sm = spec.sm_max_mhz if busy else spec.sm_idle_mhz
    if not busy:
        reasons.append("gpu_idle")
    if f.throttle == "power":
        sm = int(sm * 0.8)
        reasons.append("sw_power_cap")
        s.viol_power_ns += int(dt * 1e9)
    elif f.throttle == "thermal":
        sm = int(sm * 0.6)
        reasons.append("sw_thermal_slowdown")
        if s.temp_c >= 90.0:
            reasons.append("hw_thermal_slowdown")
        s.viol_thermal_ns += int(dt * 1e9)
    s.sm_mhz, s.reasons = sm, reasons

    s.nvlink_tx += s.util * spec.nvlink_bytes_s * dt
    s.nvlink_rx += s.util * spec.nvlink_bytes_s * dt
    if f.leak_rate_pct_h and s.processes:
        s.processes[0].leaked += f.leak_rate_pct_h / 100.0 * spec.mem_total * dt / 3600.0


def memory(s: GpuState, spec: GpuSpec) -> tuple[int, int, int]:
    """(used, free, reserved) bytes: the processes plus the driver's share, never more than exists."""
    room = spec.mem_total - spec.mem_reserved
    used = min(room, spec.driver_overhead + sum(p.used for p in s.processes))
    return used, room - used, spec.mem_reserved
