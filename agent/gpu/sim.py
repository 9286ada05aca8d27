"""Simulated GPUs behind the same interface as NVML, labelled ``sim``, with injectable faults.

Time comes from the agent's :class:`~myolo.common.clock.Clock`, so a test with a ``SimClock`` plays an hour of a
node in milliseconds and sees the same readings every run (seeded noise). What the simulator itself costs
is measured apart (:attr:`SimBackend.cost`) so the benchmark can report the agent's own share.
"""

from __future__ import annotations

import asyncio
import random
import time
import zlib
from dataclasses import dataclass

import structlog

from myolo.agent.gpu.backend import BackendName, GpuBackendError, GpuEvent, GpuEventKind
from myolo.agent.gpu.bridge import EventBridge, resolve_loop
from myolo.agent.gpu.sim_faults import (
    XID_CONTAINED,
    XID_DBE,
    XID_OFF_BUS,
    XID_REMAP_FAILURE,
    XID_REMAP_PENDING,
    XID_UNCONTAINED,
    GpuFaults,
    check_gpu,
    check_leak_rate,
    check_throttle,
    check_util,
    check_xid,
)
from myolo.agent.gpu.sim_model import GpuSpec, GpuState, LoadProfile, SimProcess, memory, settle, step, training_profile
from myolo.common.clock import Clock, SystemClock
from myolo.events.payloads import GpuProcess, GpuReading, NvLink

log = structlog.get_logger("myolo.agent.gpu")
WORKER_LOAD = 0.95  # a simulated GPU running a real worker looks this busy
WORKER_MEM_FRACTION = 0.6
WORKER_NAME = "myolo-train"
# what a simulated node's driver says: a real release's numbers (so version checks such as the pre-upgrade
# driver >= 515.65.01 judge it like a node), labelled as simulated
SIM_DRIVER_VERSION = "550.54.15 (sim)"
SIM_CUDA_VERSION = "12.4 (sim)"


@dataclass
class SimCost:
    """CPU seconds (this thread) spent in the simulator's physics versus in ``read_all`` as a whole; the
    difference is what turning state into readings costs, the analogue of the NVML calls on a real node."""

    step_cpu_s: float = 0.0
    read_cpu_s: float = 0.0
    reads: int = 0

    @property
    def convert_cpu_s(self) -> float:
        return self.read_cpu_s - self.step_cpu_s


class SimBackend:
    """``count`` simulated GPUs. ``node_tag`` makes UUIDs unique across simulated nodes."""

    name: BackendName = "sim"

    def __init__(
        self,
        count: int,
        clock: Clock | None = None,
        seed: int = 0,
        profile: LoadProfile = training_profile,
        spec: GpuSpec | None = None,
        node_tag: str = "",
    ) -> None:
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 64:
            raise ValueError(f"--simulate-gpus {count!r}: expected a whole number of GPUs between 1 and 64")
        self.count = count
        self.clock = clock or SystemClock()
        self.profile = profile
        self.spec = spec or GpuSpec()
        self.rng = random.Random(seed)
        self.cost = SimCost()
        tag = zlib.crc32(f"{node_tag}:{seed}".encode())
        self.uuids = [f"GPU-SIM-{tag:08x}-{i:04d}" for i in range(count)]
        self.gpus = [GpuState(index=i) for i in range(count)]
        self.workload: dict[int, list[int]] = {}
        self._t0: float | None = None
        self._last: float | None = None
        self._bridge: EventBridge | None = None
        self._opened = False

    # -- lifecycle -------------------------------------------------------------------------------------
    def open(self) -> None:
        self._t0 = self._last = self.clock.monotonic()
        profile_load = self.profile(0.0)
        for s in self.gpus:
            load = self._load(s, profile_load)
            self._ensure_processes(s, load)
            settle(s, self.spec, load)
            step(s, self.spec, load, 0.0, self.rng)
        self._opened = True

    def close(self) -> None:
        self.stop_events()
        self._opened = False

    def device_count(self) -> int:
        return self.count

    def driver_version(self) -> str | None:
        return SIM_DRIVER_VERSION

    def cuda_version(self) -> str | None:
        return SIM_CUDA_VERSION

    # -- readings --------------------------------------------------------------------------------------
    def advance(self) -> None:
        """Bring the physics up to the clock's present (``read_all`` does this itself)."""
        if not self._opened or self._t0 is None or self._last is None:
            raise GpuBackendError("SimBackend used before open(): call open() first")
        c0 = time.thread_time()
        now = self.clock.monotonic()
        dt = max(0.0, now - self._last)
        self._last = now
        profile_load = self.profile(now - self._t0)
        for s in self.gpus:
            load = self._load(s, profile_load)
            self._ensure_processes(s, load)
            step(s, self.spec, load, dt, self.rng)
        self.cost.step_cpu_s += time.thread_time() - c0

    def read_all(self) -> list[GpuReading]:
        c0 = time.thread_time()
        self.advance()
        out = [self._reading(s) for s in self.gpus]
        self.cost.read_cpu_s += time.thread_time() - c0
        self.cost.reads += 1
        return out

    def set_workload(self, use: dict[int, list[int]]) -> None:
        """The real worker processes on each simulated GPU (the agent's supervisor says): they replace the
        profile's imagined job in the GPU's process list, and keep the GPU busy while they run."""
        self.workload = {i: list(pids) for i, pids in use.items() if 0 <= i < self.count and pids}
        for s in self.gpus:
            pids = self.workload.get(s.index)
            if pids:
                kept = {p.pid: p for p in s.processes}
                base = int(self.spec.mem_total * WORKER_MEM_FRACTION)
                s.processes = [kept.get(pid) or SimProcess(pid=pid, base=base, name=WORKER_NAME) for pid in pids]
            elif any(p.name == WORKER_NAME for p in s.processes):
                s.processes = []

    def _load(self, s: GpuState, profile_load: float) -> float:
        return max(profile_load, WORKER_LOAD) if self.workload.get(s.index) else profile_load

    def _ensure_processes(self, s: GpuState, load: float) -> None:
        """A trainer process per busy GPU (the profile's job); an injected leak needs a process to grow."""
        busy = load > 0.02 or (s.faults.util_override or 0.0) > 0.02
        if (busy or s.faults.leak_rate_pct_h) and not s.processes:
            base = int(self.spec.mem_total * (0.70 + 0.02 * self.rng.random())) if busy else 1 << 30
            s.processes.append(SimProcess(pid=40_000 + 97 * s.index, base=base))

    def _reading(self, s: GpuState) -> GpuReading:
        spec, i = self.spec, s.index
        if s.faults.lost:
            return GpuReading(
                index=i,
                uuid=self.uuids[i],
                name=spec.name,
                pci_bus_id=sim_pci_bus_id(i),
                minor_number=i,
                health="fail",
                health_reasons=["gpu lost: fallen off the bus (simulated xid 79)"],
            )
        used, free, reserved = memory(s, spec)
        util = round(s.util_obs * 100.0, 1)
        busy = min(max(s.util_obs, 0.0), 1.0)
        return GpuReading(
            index=i,
            uuid=self.uuids[i],
            name=spec.name,
            pci_bus_id=sim_pci_bus_id(i),
            minor_number=i,
            util_gpu=util,
            util_mem=round(util * 0.55, 1),
            util_enc=0.0,
            util_dec=0.0,
            prof_gr_engine_active=round(busy, 3),
            prof_pipe_tensor_active=round(busy * 0.6, 3),
            prof_dram_active=round(busy * 0.4, 3),
            mem_total_bytes=spec.mem_total,
            mem_used_bytes=used,
            mem_free_bytes=free,
            mem_reserved_bytes=reserved,
            power_w=round(s.power_w, 1),
            power_limit_w=spec.power_cap_w if s.faults.throttle == "power" else spec.tdp_w,
            energy_j=round(s.energy_j, 1),
            temp_gpu_c=round(s.temp_c, 1),
            temp_mem_c=round(s.temp_c + 5.0, 1),
            clock_sm_mhz=s.sm_mhz,
            clock_mem_mhz=spec.mem_mhz,
            clock_event_reasons=list(s.reasons),
            violation_power_ns=s.viol_power_ns,
            violation_thermal_ns=s.viol_thermal_ns,
            ecc_corrected_volatile=s.ecc_corr_vol,
            ecc_uncorrected_volatile=s.ecc_unc_vol,
            ecc_corrected_aggregate=s.ecc_corr_agg,
            ecc_uncorrected_aggregate=s.ecc_unc_agg,
            # Hopper remaps rows instead of retiring pages: page retirement is unsupported, hence absent.
            remapped_rows_correctable=s.remap_corr,
            remapped_rows_uncorrectable=s.remap_unc,
            remapped_rows_pending=s.remap_pending,
            remapped_rows_failure=s.remap_failure,
            pcie_tx_bytes_s=round(s.util * spec.pcie_bytes_s, 0),
            pcie_rx_bytes_s=round(s.util * spec.pcie_bytes_s * 1.1, 0),
            pcie_replay_counter=0,
            pcie_link_gen=spec.pcie_gen,
            pcie_link_width=spec.pcie_width,
            nvlink=[
                NvLink(link=k, active=True, replay_errors=0, recovery_errors=0, crc_flit_errors=0, crc_data_errors=0)
                for k in range(spec.nvlinks)
            ],
            nvlink_tx_bytes=int(s.nvlink_tx),
            nvlink_rx_bytes=int(s.nvlink_rx),
            processes=[GpuProcess(pid=p.pid, used_bytes=p.used, name=p.name) for p in s.processes],
        )

    # -- faults ----------------------------------------------------------------------------------------
    def faults(self, gpu: int) -> GpuFaults:
        check_gpu(gpu, self.count)
        return self.gpus[gpu].faults

    def inject_xid(self, gpu: int, xid: int) -> None:
        """Deliver XID ``xid`` at once, and make the GPU show what that XID means where it changes readings
        (48/94/95: uncorrected ECC; 63: remap pending; 64: remap failure; 79: the GPU stops answering)."""
        i = self._one(gpu, "--xid")
        xid = check_xid(xid)
        s = self.gpus[i]
        if xid in (XID_DBE, XID_CONTAINED, XID_UNCONTAINED):
            s.ecc_unc_vol += 1
            s.ecc_unc_agg += 1
        if xid in (XID_DBE, XID_REMAP_PENDING):
            s.remap_unc += 1
            s.remap_pending = True
        if xid == XID_REMAP_FAILURE:
            s.remap_failure = True
        if xid == XID_OFF_BUS:
            s.faults.lost = True
        self._emit(i, "xid", xid)

    def inject_ecc_dbe(self, gpu: int) -> None:
        """A double-bit ECC error: counters grow, a row remap is pending, and the driver reports both the
        ECC event and XID 48, as real hardware does."""
        i = self._one(gpu, "--ecc-dbe")
        self._emit(i, "ecc_dbe", None)
        self.inject_xid(i, XID_DBE)

    def _one(self, gpu: int | None, option: str) -> int:
        if gpu is None:
            raise ValueError(f"{option} needs one GPU: pass --gpu I (0..{self.count - 1})")
        return check_gpu(gpu, self.count)[0]

    def set_leak_rate(self, gpu: int | None, pct_per_hour: float) -> None:
        rate = check_leak_rate(pct_per_hour)
        for i in check_gpu(gpu, self.count):
            self.gpus[i].faults.leak_rate_pct_h = rate

    def set_throttle(self, gpu: int | None, kind: str | None) -> None:
        throttle = check_throttle(kind)
        for i in check_gpu(gpu, self.count):
            self.gpus[i].faults.throttle = throttle

    def set_util(self, gpu: int | None, pct: float | None) -> None:
        level = check_util(pct)
        for i in check_gpu(gpu, self.count):
            self.gpus[i].faults.util_override = level

    def clear(self, gpu: int | None = None) -> None:
        """As after a GPU reset: faults and volatile error state go; aggregate counters stay; a leaked
        process is gone (it was restarted with its normal footprint)."""
        for i in check_gpu(gpu, self.count):
            s = self.gpus[i]
            s.faults = GpuFaults()
            s.ecc_corr_vol = s.ecc_unc_vol = 0
            s.remap_pending = s.remap_failure = False
            for p in s.processes:
                p.leaked = 0.0

    # -- events ----------------------------------------------------------------------------------------
    def start_events(self, loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Queue[GpuEvent]:
        if self._bridge is None:
            self._bridge = EventBridge(resolve_loop(loop))
        return self._bridge.queue

    def stop_events(self) -> None:
        if self._bridge is not None:
            self._bridge.close()
            self._bridge = None

    def _emit(self, i: int, kind: GpuEventKind, xid: int | None) -> None:
        event = GpuEvent(gpu_index=i, gpu_uuid=self.uuids[i], kind=kind, time=self.clock.now(), xid=xid, simulated=True)
        if self._bridge is None:
            log.info("sim: event not delivered: no listener (start_events not called)", kind=kind, gpu=i)
            return
        self._bridge.put(event)


def sim_pci_bus_id(index: int) -> str:
    """A made-up PCI address in NVML's format, one per simulated GPU."""
    return f"00000000:{(0x18 + 0x11 * index) % 256:02X}:00.0"
