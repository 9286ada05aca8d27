"""The NVML backend against a test double of the ``pynvml`` module.

There is no GPU here, so the double plays a driver: four GPUs, one full-featured, one that supports
little (NotSupported on many calls, no memory v2), one that is lost after open, one whose utilisation call
fails with an unexpected error. That exercises the code that matters without hardware: unsupported ->
absent (never 0), variant probing, one failing GPU or call never stopping the rest, and XID events from a
blocking wait in a thread reaching an asyncio queue.
"""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import types
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pynvml as real
import pytest

import myolo.agent.gpu.nvml as nvml_module
from myolo.agent.gpu.backend import GpuBackend, GpuBackendError
from myolo.agent.gpu.nvml import NvmlBackend
from myolo.common.clock import SimClock

GiB = 1 << 30


@dataclass(frozen=True)
class Handle:
    index: int


@dataclass
class FakeGpu:
    uuid: str
    name: str = "NVIDIA H200"
    unsupported: set[str] = field(default_factory=set)  # method names answering NotSupported
    failing: set[str] = field(default_factory=set)  # method names raising an Unknown error
    lost: bool = False
    power_mw: int = 512_000


class FakeDriver:
    """Methods named as in pynvml; :meth:`module` exposes them with the real constants and error classes."""

    def __init__(self, gpus: list[FakeGpu], has_v2_processes: bool = True) -> None:
        self.gpus = gpus
        self.calls: Counter[str] = Counter()
        self.events: queue.Queue[Any] = queue.Queue()
        self.registered: dict[int, int] = {}
        self.freed = False
        self.shutdown = False
        self.wait_threads: set[str] = set()
        self.has_v2_processes = has_v2_processes

    def module(self) -> types.ModuleType:
        m = types.ModuleType("fake_pynvml")
        for k, v in vars(real).items():
            if k.startswith(("NVML_", "NVMLError", "nvmlMemory_v2")):
                setattr(m, k, v)
        for k in dir(self):
            if k.startswith("nvml") and not (k.endswith("_v2") and "Processes" in k and not self.has_v2_processes):
                setattr(m, k, getattr(self, k))
        return m

    # -- helpers --
    def _gpu(self, h: Handle, call: str) -> FakeGpu:
        self.calls[f"{call}:{h.index}"] += 1
        g = self.gpus[h.index]
        if g.lost:
            raise real.NVMLError(real.NVML_ERROR_GPU_IS_LOST)
        if call in g.unsupported:
            raise real.NVMLError(real.NVML_ERROR_NOT_SUPPORTED)
        if call in g.failing:
            raise real.NVMLError(real.NVML_ERROR_UNKNOWN)
        return g

    def push_xid(self, index: int, xid: int) -> None:
        self.events.put(types.SimpleNamespace(device=Handle(index), eventType=0x8, eventData=xid))

    # -- system --
    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shutdown = True

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlSystemGetDriverVersion(self) -> str:
        return "570.124.06"

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return 12080

    def nvmlSystemGetProcessName(self, pid: int) -> bytes:
        return b"python"

    # -- identity --
    def nvmlDeviceGetHandleByIndex(self, i: int) -> Handle:
        return Handle(i)

    def nvmlDeviceGetUUID(self, h: Handle) -> str:
        return self.gpus[h.index].uuid

    def nvmlDeviceGetName(self, h: Handle) -> bytes:
        return self.gpus[h.index].name.encode()

    # -- readings --
    def nvmlDeviceGetUtilizationRates(self, h: Handle) -> Any:
        self._gpu(h, "util")
        return types.SimpleNamespace(gpu=87, memory=41)

    def nvmlDeviceGetMemoryInfo(self, h: Handle, version: int | None = None) -> Any:
        g = self._gpu(h, "memory_v2" if version else "memory_v1")
        total, used = 141 * GiB, 100 * GiB
        if version:
            return types.SimpleNamespace(total=total, used=used, free=total - used - GiB, reserved=GiB)
        assert g is not None
        return types.SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetPowerUsage(self, h: Handle) -> int:
        return self._gpu(h, "power").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: Handle) -> int:
        self._gpu(h, "power_limit")
        return 700_000

    def nvmlDeviceGetTotalEnergyConsumption(self, h: Handle) -> int:
        self._gpu(h, "energy")
        return 3_600_000

    def nvmlDeviceGetTemperature(self, h: Handle, sensor: int) -> int:
        self._gpu(h, "temp")
        return 64

    def nvmlDeviceGetClockInfo(self, h: Handle, kind: int) -> int:
        self._gpu(h, "clock")
        return 1980 if kind == real.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: Handle) -> int:
        self._gpu(h, "reasons")
        return 0x4 | 0x40

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: Handle) -> int:
        self._gpu(h, "reasons_old")
        return 0x1

    def nvmlDeviceGetViolationStatus(self, h: Handle, policy: int) -> Any:
        self._gpu(h, "violation")
        return types.SimpleNamespace(
            referenceTime=1, violationTime=5_000 if policy == real.NVML_PERF_POLICY_POWER else 0
        )

    def nvmlDeviceGetTotalEccErrors(self, h: Handle, error_type: int, counter: int) -> int:
        self._gpu(h, "ecc")
        return 3 if error_type == real.NVML_MEMORY_ERROR_TYPE_CORRECTED else 0

    def nvmlDeviceGetRetiredPages_v2(self, h: Handle, cause: int) -> list[dict[str, int]]:
        self._gpu(h, "retired_v2")
        return [{"address": 1, "timestamp": 2}] * (2 if cause == 0 else 1)

    def nvmlDeviceGetRetiredPages(self, h: Handle, cause: int) -> list[int]:
        self._gpu(h, "retired_v1")
        return [1]

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: Handle) -> int:
        self._gpu(h, "retired_pending")
        return 0

    def nvmlDeviceGetRemappedRows(self, h: Handle) -> tuple[int, int, int, int]:
        self._gpu(h, "remap")
        return (2, 0, 0, 0)

    def nvmlDeviceGetPcieThroughput(self, h: Handle, counter: int) -> int:
        self._gpu(h, "pcie")
        return 1000 if counter == real.NVML_PCIE_UTIL_TX_BYTES else 2000

    def nvmlDeviceGetPcieReplayCounter(self, h: Handle) -> int:
        self._gpu(h, "pcie_replay")
        return 0

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: Handle) -> int:
        self._gpu(h, "pcie_gen")
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: Handle) -> int:
        self._gpu(h, "pcie_width")
        return 16

    def nvmlDeviceGetNvLinkState(self, h: Handle, link: int) -> int:
        self._gpu(h, "nvlink_state")
        if link >= 2:
            raise real.NVMLError(real.NVML_ERROR_INVALID_ARGUMENT)
        return 1

    def nvmlDeviceGetNvLinkErrorCounter(self, h: Handle, link: int, counter: int) -> int:
        self._gpu(h, "nvlink_errors")
        return 7 if counter == real.NVML_NVLINK_ERROR_DL_REPLAY and link == 1 else 0

    def nvmlDeviceGetFieldValues(self, h: Handle, ids: list[Any]) -> list[Any]:
        self._gpu(h, "fields")
        out = []
        for fid in ids:
            fid, scope = fid if isinstance(fid, tuple) else (fid, 0)
            if fid == real.NVML_FI_DEV_MEMORY_TEMP:
                value, vtype = types.SimpleNamespace(uiVal=71), real.NVML_VALUE_TYPE_UNSIGNED_INT
            else:
                value, vtype = types.SimpleNamespace(ullVal=10 + scope), real.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            out.append(types.SimpleNamespace(fieldId=fid, scopeId=scope, nvmlReturn=0, valueType=vtype, value=value))
        return out

    def nvmlDeviceGetComputeRunningProcesses_v2(self, h: Handle) -> list[Any]:
        self._gpu(h, "procs_v2")
        return [
            types.SimpleNamespace(pid=4242, usedGpuMemory=8 * GiB),
            types.SimpleNamespace(pid=4243, usedGpuMemory=None),
        ]

    def nvmlDeviceGetComputeRunningProcesses(self, h: Handle) -> list[Any]:
        self._gpu(h, "procs_v1")
        return [types.SimpleNamespace(pid=1, usedGpuMemory=1)]

    # -- events --
    def nvmlEventSetCreate(self) -> str:
        return "event-set"

    def nvmlDeviceGetSupportedEventTypes(self, h: Handle) -> int:
        self._gpu(h, "event_types")
        return 0x8 | 0x2 | 0x4  # XID, DBE, and a P-state bit we do not ask for

    def nvmlDeviceRegisterEvents(self, h: Handle, mask: int, event_set: str) -> None:
        self.registered[h.index] = mask

    def nvmlEventSetWait(self, event_set: str, timeout_ms: int) -> Any:
        self.wait_threads.add(threading.current_thread().name)
        try:
            return self.events.get(timeout=timeout_ms / 1000.0)
        except queue.Empty:
            raise real.NVMLError(real.NVML_ERROR_TIMEOUT) from None

    def nvmlEventSetFree(self, event_set: str) -> None:
        self.freed = True


def four_gpus() -> FakeDriver:
    return FakeDriver(
        [
            FakeGpu("GPU-aaaa"),
            FakeGpu(
                "GPU-bbbb",
                name="NVIDIA A10",
                unsupported={
                    "memory_v2",
                    "ecc",
                    "retired_v2",
                    "retired_v1",
                    "retired_pending",
                    "remap",
                    "nvlink_state",
                    "reasons",
                    "violation",
                    "energy",
                },
                power_mw=0,
            ),
            FakeGpu("GPU-cccc"),
            FakeGpu("GPU-dddd", failing={"util"}),
        ]
    )


def open_backend(monkeypatch: pytest.MonkeyPatch, drv: FakeDriver, clock: Any = None) -> NvmlBackend:
    monkeypatch.setattr(nvml_module, "pynvml", drv.module())
    b = NvmlBackend(clock or SimClock(), event_wait_ms=20)
    b.open()
    return b


def test_full_featured_gpu_reads_every_field_in_payload_units(monkeypatch: pytest.MonkeyPatch) -> None:
    drv = four_gpus()
    b = open_backend(monkeypatch, drv)
    assert isinstance(b, GpuBackend) and b.name == "nvml"
    assert (b.device_count(), b.driver_version(), b.cuda_version()) == (4, "570.124.06", "12.8")
    r = b.read_all()[0]
    assert (r.index, r.uuid, r.name) == (0, "GPU-aaaa", "NVIDIA H200")
    assert (r.util_gpu, r.util_mem) == (87.0, 41.0)
    assert (r.mem_total_bytes, r.mem_used_bytes, r.mem_reserved_bytes) == (141 * GiB, 100 * GiB, GiB)
    assert (r.power_w, r.power_limit_w, r.energy_j) == (512.0, 700.0, 3600.0)
    assert (r.temp_gpu_c, r.temp_mem_c, r.clock_sm_mhz, r.clock_mem_mhz) == (64.0, 71.0, 1980, 2619)
    assert r.clock_event_reasons == ["sw_power_cap", "hw_thermal_slowdown"]
    assert (r.violation_power_ns, r.violation_thermal_ns) == (5000, 0)
    assert (r.ecc_corrected_volatile, r.ecc_uncorrected_volatile, r.ecc_corrected_aggregate) == (3, 0, 3)
    assert (r.retired_pages_sbe, r.retired_pages_dbe, r.retired_pages_pending) == (2, 1, False)
    assert (r.remapped_rows_correctable, r.remapped_rows_uncorrectable, r.remapped_rows_failure) == (2, 0, False)
    assert (r.pcie_tx_bytes_s, r.pcie_rx_bytes_s, r.pcie_link_gen, r.pcie_link_width) == (1024000.0, 2048000.0, 5, 16)
    assert r.pcie_replay_counter == 0
    assert r.nvlink is not None and [nl.link for nl in r.nvlink] == [0, 1]
    assert r.nvlink[1].replay_errors == 7 and r.nvlink[0].crc_flit_errors == 0
    assert (r.nvlink_tx_bytes, r.nvlink_rx_bytes) == ((10 + 11) * 1024, (10 + 11) * 1024)
    assert r.processes is not None
    assert [(p.pid, p.used_bytes, p.name) for p in r.processes] == [(4242, 8 * GiB, "python"), (4243, None, "python")]
    assert r.health == "ok"


def test_unsupported_fields_are_absent_not_zero_and_not_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    drv = four_gpus()
    b = open_backend(monkeypatch, drv)
    b.read_all()
    r = b.read_all()[1]
    # NotSupported -> None; a real zero stays zero
    for attr in (
        "ecc_corrected_volatile",
        "ecc_uncorrected_aggregate",
        "retired_pages_sbe",
        "retired_pages_pending",
        "remapped_rows_uncorrectable",
        "remapped_rows_failure",
        "violation_power_ns",
        "energy_j",
        "mem_reserved_bytes",
        "nvlink",
        "nvlink_tx_bytes",
    ):
        assert getattr(r, attr) is None, attr
    assert r.power_w == 0.0
    # memory v2 unsupported -> v1 answered; newer reasons call unsupported -> the older one answered
    assert (r.mem_total_bytes, r.mem_used_bytes) == (141 * GiB, 100 * GiB)
    assert r.clock_event_reasons == ["gpu_idle"]
    # NotSupported is a property of the device: asked once, not every sample
    assert drv.calls["ecc:1"] == 4  # four counters, first read only
    assert drv.calls["memory_v2:1"] == 1
    assert drv.calls["ecc:0"] == 8
    # GPU 1 falling back to memory v1 must not make GPU 0 lose its v2-only "reserved" field
    assert b.read_all()[0].mem_reserved_bytes == GiB
    encoded = msgspec.json.decode(msgspec.json.encode(r))
    assert "ecc_corrected_volatile" not in encoded and encoded["power_w"] == 0.0


def test_lost_gpu_and_failing_call_do_not_stop_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    drv = four_gpus()
    b = open_backend(monkeypatch, drv)
    drv.gpus[2].lost = True  # falls off the bus after open
    readings = b.read_all()
    assert [r.index for r in readings] == [0, 1, 2, 3]
    lost = readings[2]
    assert (lost.uuid, lost.health, lost.util_gpu) == ("GPU-cccc", "fail", None)
    assert lost.health_reasons and "gpu lost" in lost.health_reasons[0]
    flaky = readings[3]
    assert flaky.util_gpu is None and flaky.mem_used_bytes == 100 * GiB and flaky.health == "ok"
    assert b.caller is not None and b.caller.errors["utilization"] == 1
    # an unexpected error is not cached as "unsupported": it is asked again next time
    drv.gpus[3].failing.clear()
    assert b.read_all()[3].util_gpu == 87.0
    assert readings[0].util_gpu == 87.0


def test_gpu_that_cannot_be_opened_is_reported_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    drv = four_gpus()
    original = drv.nvmlDeviceGetUUID

    def uuid(h: Handle) -> str:
        if h.index == 1:
            raise real.NVMLError(real.NVML_ERROR_UNKNOWN)
        return original(h)

    drv.nvmlDeviceGetUUID = uuid  # type: ignore[method-assign]
    b = open_backend(monkeypatch, drv)
    readings = b.read_all()
    assert len(readings) == 4 and readings[1].health == "fail" and "cannot open" in readings[1].health_reasons[0]
    assert readings[0].health == "ok" and readings[2].util_gpu == 87.0


def test_process_variant_probing_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    drv = FakeDriver([FakeGpu("GPU-aaaa")], has_v2_processes=False)
    b = open_backend(monkeypatch, drv)
    procs = b.read_all()[0].processes
    assert procs is not None and [p.pid for p in procs] == [1]


def test_open_without_driver_suggests_simulation(monkeypatch: pytest.MonkeyPatch) -> None:
    drv = four_gpus()
    m = drv.module()

    def no_library() -> None:
        raise real.NVMLError(real.NVML_ERROR_LIBRARY_NOT_FOUND)

    m.nvmlInit = no_library  # type: ignore[attr-defined]
    monkeypatch.setattr(nvml_module, "pynvml", m)
    with pytest.raises(GpuBackendError, match=r"--simulate-gpus") as info:
        NvmlBackend().open()
    assert isinstance(info.value.__cause__, real.NVMLError_LibraryNotFound)


def test_open_with_the_real_bindings_on_this_machine() -> None:
    """The real ``pynvml`` on a machine without a driver (this one) must give the same clear error."""
    try:
        real.nvmlInit()
    except real.NVMLError:
        pass
    else:
        real.nvmlShutdown()
        pytest.skip("an NVIDIA driver is present: covered by agent/gpu/real_gpu_check.py")
    with pytest.raises(GpuBackendError, match="simulate-gpus"):
        NvmlBackend().open()


def test_read_before_open_is_a_clear_error() -> None:
    with pytest.raises(GpuBackendError, match="open"):
        NvmlBackend().read_all()


async def test_xid_events_cross_from_the_wait_thread_to_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    drv = four_gpus()
    clock = SimClock()
    b = open_backend(monkeypatch, drv, clock)
    q = b.start_events()
    assert b.start_events() is q
    # each GPU is registered for the kinds we want that it supports (XID, DBE), not the P-state bit
    assert drv.registered == {0: 0xA, 1: 0xA, 2: 0xA, 3: 0xA}
    drv.push_xid(3, 79)
    drv.push_xid(0, 13)
    first = await asyncio.wait_for(q.get(), timeout=10)
    second = await asyncio.wait_for(q.get(), timeout=10)
    assert (first.gpu_index, first.gpu_uuid, first.kind, first.xid, first.simulated) == (
        3,
        "GPU-dddd",
        "xid",
        79,
        False,
    )
    assert first.time == clock.now()
    assert (second.gpu_index, second.xid) == (0, 13)
    assert drv.wait_threads == {"nvml-events"}
    events = b._events
    assert events is not None and events.running
    await asyncio.to_thread(b.close)
    assert not events.running and drv.freed and drv.shutdown
    assert b.lib is None


async def test_events_of_a_gpu_without_event_support_do_not_stop_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    drv = four_gpus()
    drv.gpus[1].unsupported.add("event_types")
    b = open_backend(monkeypatch, drv)
    q = b.start_events()
    assert set(drv.registered) == {0, 2, 3}
    drv.push_xid(2, 48)
    ev = await asyncio.wait_for(q.get(), timeout=10)
    assert (ev.gpu_index, ev.xid) == (2, 48)
    await asyncio.to_thread(b.stop_events)
    assert drv.freed


def test_real_gpu_check_script_passes_on_a_driver_that_looks_real(
    monkeypatch: pytest.MonkeyPatch, tmp_path, capsys, restore_logging
) -> None:
    from myolo.agent.gpu import real_gpu_check

    drv = four_gpus()
    monkeypatch.setattr(nvml_module, "pynvml", drv.module())
    out = tmp_path / "r.json"
    code = real_gpu_check.main(["--no-cli", "--repeats", "3", "--listen", "0", "--out", str(out)])
    result = json.loads(out.read_text())
    assert code == 0 and result["ok"] is True, result["problems"]
    assert result["backend"] == "nvml" and result["gpu_count"] == 4 and result["driver_version"] == "570.124.06"
    assert "ecc_corrected_volatile" in result["gpus"][1]["absent_fields"]
    assert "ecc_corrected_volatile" not in result["gpus"][0]["absent_fields"]
    assert result["read_all"]["median_ms"] >= 0 and result["events"]["thread_stopped"] is True
    printed = capsys.readouterr()
    assert json.loads(printed.out)["ok"] is True  # stdout is the result alone
    assert "nvml: field failed; reported as absent" in printed.err  # the driver's warnings go to stderr


def test_real_gpu_check_script_refuses_simulated_or_missing_gpus(
    monkeypatch: pytest.MonkeyPatch, capsys, restore_logging
) -> None:
    from myolo.agent.gpu import real_gpu_check

    drv = FakeDriver([FakeGpu("GPU-SIM-0000-0001", name="H200-sim")])
    monkeypatch.setattr(nvml_module, "pynvml", drv.module())
    assert real_gpu_check.main(["--no-cli", "--repeats", "1", "--listen", "0"]) == 1
    assert any("simulated uuid" in p for p in json.loads(capsys.readouterr().out)["problems"])

    m = drv.module()
    m.nvmlInit = lambda: (_ for _ in ()).throw(real.NVMLError(real.NVML_ERROR_DRIVER_NOT_LOADED))
    monkeypatch.setattr(nvml_module, "pynvml", m)
    assert real_gpu_check.main(["--no-cli"]) == 1
    assert "--simulate-gpus" in json.loads(capsys.readouterr().out)["error"]
