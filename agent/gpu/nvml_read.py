"""One GPU's reading from NVML: every field of ``GpuReading`` (myolo.events.payloads.node), each one absent when unsupported.

Units are converted here, once, to what the payload says: bytes, watts, joules, degrees C, MHz, ns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from myolo.agent.gpu.nvml_calls import NvmlCaller, text
from myolo.agent.gpu.reasons import decode_clock_event_reasons
from myolo.events.payloads import GpuProcess, GpuReading, NvLink

_NVLINK_COUNTERS = (
    ("replay_errors", "NVML_NVLINK_ERROR_DL_REPLAY", 0),
    ("recovery_errors", "NVML_NVLINK_ERROR_DL_RECOVERY", 1),
    ("crc_flit_errors", "NVML_NVLINK_ERROR_DL_CRC_FLIT", 2),
    ("crc_data_errors", "NVML_NVLINK_ERROR_DL_CRC_DATA", 3),
)


@dataclass
class DeviceInfo:
    """What does not change while the agent runs: found once at ``open``."""

    index: int
    handle: Any
    uuid: str
    name: str
    nvlinks: list[int] = field(default_factory=list)
    pci_bus_id: str | None = None
    minor_number: int | None = None


def const(lib: Any, name: str, default: int) -> int:
    """An NVML constant from the bindings, with the header's value when an old binding lacks it."""
    return int(getattr(lib, name, default))


def discover_nvlinks(lib: Any, c: NvmlCaller, index: int, handle: Any) -> list[int]:
    """Links that answer ``nvmlDeviceGetNvLinkState``; probed once because most of the 36 slots do not
    exist on a given GPU and asking them every second would cost more than the whole rest of a sample."""
    links = []
    for link in range(const(lib, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            lib.nvmlDeviceGetNvLinkState(handle, link)
        except Exception:  # not supported / invalid argument: no such link
            continue
        links.append(link)
    return links


def read_device(lib: Any, c: NvmlCaller, dev: DeviceInfo, process_names: dict[int, str] | None = None) -> GpuReading:
    """Read every field of one GPU. Raises ``GpuLost`` only when the GPU stopped answering."""
    i, h = dev.index, dev.handle
    r = GpuReading(index=i, uuid=dev.uuid, name=dev.name, pci_bus_id=dev.pci_bus_id, minor_number=dev.minor_number)

    util = c.get(i, "utilization", lambda: lib.nvmlDeviceGetUtilizationRates(h))
    if util is not None:
        r.util_gpu, r.util_mem = float(util.gpu), float(util.memory)
    enc = c.get(i, "util_enc", lambda: lib.nvmlDeviceGetEncoderUtilization(h))  # [percent, sampling period us]
    r.util_enc = float(enc[0]) if enc is not None else None
    dec = c.get(i, "util_dec", lambda: lib.nvmlDeviceGetDecoderUtilization(h))
    r.util_dec = float(dec[0]) if dec is not None else None

    mem = c.get(
        i,
        "memory",
        lambda: lib.nvmlDeviceGetMemoryInfo(h, version=lib.nvmlMemory_v2),
        lambda: lib.nvmlDeviceGetMemoryInfo(h),
    )
    if mem is not None:
        r.mem_total_bytes, r.mem_used_bytes, r.mem_free_bytes = int(mem.total), int(mem.used), int(mem.free)
        reserved = getattr(mem, "reserved", None)
        r.mem_reserved_bytes = int(reserved) if reserved is not None else None

    _power(lib, c, i, h, r)
    _thermal_and_clocks(lib, c, i, h, r)
    _ecc_and_memory_health(lib, c, i, h, r)
    _pcie(lib, c, i, h, r)
    _nvlink_and_fields(lib, c, dev, r)
    _processes(lib, c, i, h, r, process_names)
    return r


def _power(lib: Any, c: NvmlCaller, i: int, h: Any, r: GpuReading) -> None:
    mw = c.get(i, "power", lambda: lib.nvmlDeviceGetPowerUsage(h))
    r.power_w = mw / 1000.0 if mw is not None else None
    limit = c.get(i, "power_limit", lambda: lib.nvmlDeviceGetEnforcedPowerLimit(h))
    r.power_limit_w = limit / 1000.0 if limit is not None else None
    mj = c.get(i, "energy", lambda: lib.nvmlDeviceGetTotalEnergyConsumption(h))
    r.energy_j = mj / 1000.0 if mj is not None else None


def _thermal_and_clocks(lib: Any, c: NvmlCaller, i: int, h: Any, r: GpuReading) -> None:
    t = c.get(i, "temp_gpu", lambda: lib.nvmlDeviceGetTemperature(h, const(lib, "NVML_TEMPERATURE_GPU", 0)))
    r.temp_gpu_c = float(t) if t is not None else None
    r.clock_sm_mhz = c.get(i, "clock_sm", lambda: lib.nvmlDeviceGetClockInfo(h, const(lib, "NVML_CLOCK_SM", 1)))
    r.clock_mem_mhz = c.get(i, "clock_mem", lambda: lib.nvmlDeviceGetClockInfo(h, const(lib, "NVML_CLOCK_MEM", 2)))
    mask = c.get(
        i,
        "clock_event_reasons",
        lambda: lib.nvmlDeviceGetCurrentClocksEventReasons(h),
        lambda: lib.nvmlDeviceGetCurrentClocksThrottleReasons(h),
    )
    r.clock_event_reasons = decode_clock_event_reasons(int(mask)) if mask is not None else None
    for attr, policy, default in (
        ("violation_power_ns", "NVML_PERF_POLICY_POWER", 0),
        ("violation_thermal_ns", "NVML_PERF_POLICY_THERMAL", 1),
    ):
        v = c.get(i, attr, lambda p=const(lib, policy, default): lib.nvmlDeviceGetViolationStatus(h, p))
        setattr(r, attr, int(v.violationTime) if v is not None else None)


def _ecc_and_memory_health(lib: Any, c: NvmlCaller, i: int, h: Any, r: GpuReading) -> None:
    corrected = const(lib, "NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
    uncorrected = const(lib, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    volatile, aggregate = const(lib, "NVML_VOLATILE_ECC", 0), const(lib, "NVML_AGGREGATE_ECC", 1)
    for attr, et, ct in (
        ("ecc_corrected_volatile", corrected, volatile),
        ("ecc_uncorrected_volatile", uncorrected, volatile),
        ("ecc_corrected_aggregate", corrected, aggregate),
        ("ecc_uncorrected_aggregate", uncorrected, aggregate),
    ):
        setattr(r, attr, c.get(i, attr, lambda et=et, ct=ct: lib.nvmlDeviceGetTotalEccErrors(h, et, ct)))

    for attr, cause in (
        ("retired_pages_sbe", const(lib, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0)),
        ("retired_pages_dbe", const(lib, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)),
    ):
        pages = c.get(
            i,
            attr,
            lambda cause=cause: lib.nvmlDeviceGetRetiredPages_v2(h, cause),
            lambda cause=cause: lib.nvmlDeviceGetRetiredPages(h, cause),
        )
        setattr(r, attr, len(pages) if pages is not None else None)
    pending = c.get(i, "retired_pages_pending", lambda: lib.nvmlDeviceGetRetiredPagesPendingStatus(h))
    r.retired_pages_pending = bool(pending) if pending is not None else None

    rows = c.get(i, "remapped_rows", lambda: lib.nvmlDeviceGetRemappedRows(h))
    if rows is not None:
        corr, unc, pend, fail = rows
        r.remapped_rows_correctable, r.remapped_rows_uncorrectable = int(corr), int(unc)
        r.remapped_rows_pending, r.remapped_rows_failure = bool(pend), bool(fail)


def _pcie(lib: Any, c: NvmlCaller, i: int, h: Any, r: GpuReading) -> None:
    for attr, counter, default in (
        ("pcie_tx_bytes_s", "NVML_PCIE_UTIL_TX_BYTES", 0),
        ("pcie_rx_bytes_s", "NVML_PCIE_UTIL_RX_BYTES", 1),
    ):
        kb_s = c.get(i, attr, lambda k=const(lib, counter, default): lib.nvmlDeviceGetPcieThroughput(h, k))
        setattr(r, attr, kb_s * 1024.0 if kb_s is not None else None)  # NVML reports KB/s
    r.pcie_replay_counter = c.get(i, "pcie_replay", lambda: lib.nvmlDeviceGetPcieReplayCounter(h))
    r.pcie_link_gen = c.get(i, "pcie_gen", lambda: lib.nvmlDeviceGetCurrPcieLinkGeneration(h))
    r.pcie_link_width = c.get(i, "pcie_width", lambda: lib.nvmlDeviceGetCurrPcieLinkWidth(h))


def _nvlink_and_fields(lib: Any, c: NvmlCaller, dev: DeviceInfo, r: GpuReading) -> None:
    i, h = dev.index, dev.handle
    if dev.nvlinks:
        links = []
        for link in dev.nvlinks:
            state = c.get(i, f"nvlink{link}_state", lambda link=link: lib.nvmlDeviceGetNvLinkState(h, link))
            if state is None:
                continue
            nl = NvLink(link=link, active=bool(state))
            for attr, name, default in _NVLINK_COUNTERS:
                counter = const(lib, name, default)
                value = c.get(
                    i, f"nvlink_{attr}", lambda k=counter, link=link: lib.nvmlDeviceGetNvLinkErrorCounter(h, link, k)
                )
                setattr(nl, attr, int(value) if value is not None else None)
            links.append(nl)
        r.nvlink = links or None

    # Memory temperature and NVLink data counters come from one field-values call.
    mem_temp = const(lib, "NVML_FI_DEV_MEMORY_TEMP", 82)
    tx_id = const(lib, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", 138)
    rx_id = const(lib, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", 139)
    active = [nl.link for nl in r.nvlink or [] if nl.active]
    ids: list[Any] = [mem_temp, *((tx_id, link) for link in active), *((rx_id, link) for link in active)]
    values = c.get(i, "field_values", lambda: lib.nvmlDeviceGetFieldValues(h, ids))
    if values is None:
        return
    tx = rx = 0
    tx_ok = rx_ok = bool(active)
    for v in values:
        ok = int(v.nvmlReturn) == 0
        value = field_value(v) if ok else None
        fid = int(v.fieldId)
        if fid == mem_temp:
            r.temp_mem_c = float(value) if value is not None else None
        elif fid == tx_id:
            tx_ok = tx_ok and value is not None
            tx += int(value or 0)
        elif fid == rx_id:
            rx_ok = rx_ok and value is not None
            rx += int(value or 0)
    r.nvlink_tx_bytes = tx * 1024 if tx_ok else None  # counters are KiB
    r.nvlink_rx_bytes = rx * 1024 if rx_ok else None


def field_value(v: Any) -> float | int | None:
    """The value of one ``nvmlFieldValue_t`` by its ``valueType`` (a C union)."""
    member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(int(v.valueType))
    return getattr(v.value, member) if member else None


def _processes(lib: Any, c: NvmlCaller, i: int, h: Any, r: GpuReading, names: dict[int, str] | None) -> None:
    procs = c.get(
        i,
        "processes",
        lambda: lib.nvmlDeviceGetComputeRunningProcesses_v3(h),
        lambda: lib.nvmlDeviceGetComputeRunningProcesses_v2(h),
        lambda: lib.nvmlDeviceGetComputeRunningProcesses(h),
    )
    if procs is None:
        return
    out = []
    for p in procs:
        pid = int(p.pid)
        used = getattr(p, "usedGpuMemory", None)
        name = None
        if names is not None:  # cached per pid; another thread may clear the cache, so never index it
            name = names.get(pid)
            if name is None:
                got = c.get(i, "process_name", lambda pid=pid: lib.nvmlSystemGetProcessName(pid))
                name = names[pid] = text(got) if got is not None else ""
            name = name or None
        out.append(GpuProcess(pid=pid, used_bytes=int(used) if used is not None else None, name=name))
    r.processes = out
