"""Cheap, correlated GPU physics for a whole simulated fleet, one numpy array per quantity.

``myolo.agent.gpu.sim_model`` steps one GPU at a time with Python floats: right for one agent, too slow for
2,000 nodes x 8 GPUs every second on a small machine. Here every quantity is an ``(nodes, gpus)`` array and
one call steps a contiguous block of nodes (the nodes due in one time slot), so the cost per sample is a few
microseconds of numpy and the numbers still move together the way real ones do: utilisation follows the
node's job phase with a lag, power follows utilisation, temperature follows power with a thermal time
constant, memory is the job's footprint while it runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

GiB = 1 << 30
MiB = 1 << 20

# Job phases of a node and the utilisation each one aims at (fraction of 1).
PHASES = np.array([0.96, 0.45, 0.08, 0.0])  # training, evaluation, checkpoint, idle
PHASE_WEIGHTS = np.array([0.75, 0.08, 0.05, 0.12])
FIELDS_PER_GPU = 9  # util_gpu, util_mem, mem_used, mem_free, power_w, energy_j, temp_gpu_c, temp_mem_c, clock_sm


@dataclass(frozen=True)
class FleetSpec:
    """An H200 SXM near enough (the numbers myolo.agent.gpu.sim_model uses too)."""

    mem_total: int = 143_771 * MiB
    mem_reserved: int = 535 * MiB
    driver_overhead: int = 512 * MiB
    tdp_w: float = 700.0
    idle_w: float = 75.0
    sm_max_mhz: int = 1980
    sm_idle_mhz: int = 345
    ambient_c: float = 27.0
    c_per_w: float = 0.075
    util_tau_s: float = 2.0
    temp_tau_s: float = 45.0
    phase_change_per_s: float = 1 / 600  # a node changes job phase every ten minutes on average


class FleetModel:
    """The state of every GPU of every simulated node. ``step(lo, hi, dt)`` advances nodes ``lo..hi-1`` and
    returns their sample values as rows of Python numbers, in the order :mod:`myolo.agent.fleetsim.template`
    expects: ``[(util_gpu, util_mem, mem_used, mem_free, power, energy, temp, temp_mem, sm) * G, seq, cpu]``.
    """

    def __init__(self, nodes: int, gpus: int, *, seed: int = 0, spec: FleetSpec | None = None) -> None:
        self.spec = s = spec or FleetSpec()
        self.rng = np.random.default_rng(seed)
        self.nodes, self.gpus = nodes, gpus
        self.phase = self.rng.choice(len(PHASES), size=nodes, p=PHASE_WEIGHTS)
        target = PHASES[self.phase][:, None] * np.ones((1, gpus))
        self.util = target.copy()
        self.power = s.idle_w + (s.tdp_w - s.idle_w) * self.util
        self.temp = s.ambient_c + s.c_per_w * self.power
        self.energy = self.rng.uniform(1e5, 1e8, size=(nodes, gpus))
        # each node's job needs a fixed footprint per GPU (60..130 GiB), like a real data-parallel job
        self.job_mem = np.floor(self.rng.uniform(60, 130, size=(nodes, 1)) * GiB) * np.ones((1, gpus))
        self.util_override = np.full((nodes, gpus), np.nan)  # NaN: no override (a fault may pin a GPU)
        self.seq = np.zeros((nodes, 1))  # samples made per node: the sample's ``seq``

    def step(self, lo: int, hi: int, dt: float) -> list[list[float]]:
        s, rng = self.spec, self.rng
        n = hi - lo
        if n <= 0:
            return []
        change = rng.random(n) < s.phase_change_per_s * dt
        if change.any():
            self.phase[lo:hi][change] = rng.choice(len(PHASES), size=int(change.sum()), p=PHASE_WEIGHTS)
        target = PHASES[self.phase[lo:hi]][:, None] + rng.normal(0.0, 0.01, (n, self.gpus))
        util = self.util[lo:hi]
        util += (target - util) * (1.0 - math.exp(-dt / s.util_tau_s))
        pinned = self.util_override[lo:hi]
        if not np.isnan(pinned).all():  # a pinned GPU jumps there: a GPU off the bus stops at once
            util[:] = np.where(np.isnan(pinned), util, pinned)
        np.clip(util, 0.0, 1.0, out=util)
        busy = util > 0.01
        power = self.power[lo:hi]
        power[:] = s.idle_w + (s.tdp_w - s.idle_w) * util + rng.normal(0.0, 4.0, (n, self.gpus))
        np.maximum(power, s.idle_w * 0.9, out=power)
        energy = self.energy[lo:hi]
        energy += power * dt
        temp = self.temp[lo:hi]
        temp += (s.ambient_c + s.c_per_w * power - temp) * (1.0 - math.exp(-dt / s.temp_tau_s))
        room = s.mem_total - s.mem_reserved
        used = np.where(busy, self.job_mem[lo:hi], 0.0) + s.driver_overhead
        used += np.where(busy, rng.integers(0, 64, (n, self.gpus)) * MiB, 0)  # allocator jitter
        np.minimum(used, room, out=used)
        util_mem = np.clip(util * 45.0 + rng.normal(0.0, 1.0, (n, self.gpus)), 0.0, 100.0)
        per_gpu = np.stack(
            [
                util * 100.0,
                util_mem,
                used,
                room - used,
                power,
                energy,
                temp,
                temp + 7.0,
                np.where(busy, float(s.sm_max_mhz), float(s.sm_idle_mhz)),
            ],
            axis=2,
        ).reshape(n, self.gpus * FIELDS_PER_GPU)
        cpu = np.clip(util.mean(axis=1) * 30.0 + 2.0, 0.0, 100.0)[:, None]
        seq = self.seq[lo:hi]
        seq += 1
        return np.concatenate([per_gpu, seq, cpu], axis=1).tolist()

    def pin_util(self, node: int, gpu: int | None, util: float | None) -> None:
        """Hold a GPU's utilisation (a fault: a GPU off the bus shows 0) or release it with ``None``."""
        cols = slice(None) if gpu is None else slice(gpu, gpu + 1)
        self.util_override[node, cols] = np.nan if util is None else util
