"""The agent's metric sources: each ``source`` named in the mapping file, its unit, and how its series are read
from one :class:`View` (the last sample, what was published, the spool's and the sender's counters).

A GPU source yields, for one GPU's reading, ``(values of the metric's by-labels, value)`` pairs; a node source
the same for the node. A field the hardware does not support (None) yields nothing, so the series is absent,
as dcgm-exporter leaves it out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import get_args

from myolo.agent.metrics.observed import Observed
from myolo.agent.publish.publisher import PublisherStatus
from myolo.agent.spool.stats import SpoolStats
from myolo.events.payloads import GpuReading, NodeSample
from myolo.events.payloads.common import Health
from myolo.events.payloads.node import NvLinkCounter
from myolo.events.payloads.training import WorkerState

Series = tuple[tuple[str, ...], float]
HEALTH_STATES: tuple[str, ...] = get_args(Health)
WORKER_PHASES: tuple[str, ...] = get_args(WorkerState)
NO_XID = (("0", "No Error"), 0.0)  # the last-XID gauge before any XID, as dcgm-exporter shows it


@dataclass(frozen=True)
class View:
    """What one scrape (or one OpenTelemetry collection) reads; built in one go so the series agree."""

    sample: NodeSample | None
    observed: Observed
    spool: SpoolStats
    sender: PublisherStatus
    now_monotonic: float
    sample_monotonic: float | None
    hostname: str


@dataclass(frozen=True)
class Source:
    unit: str
    gpu: Callable[[GpuReading, View], Iterable[Series]] | None = None
    node: Callable[[View], Iterable[Series]] | None = None


def _field(name: str) -> Callable[[GpuReading, View], Iterator[Series]]:
    def read(g: GpuReading, _v: View) -> Iterator[Series]:
        value = getattr(g, name)
        if value is not None:
            yield (), float(value)

    return read


# GpuReading fields exported as they are, with the unit the payload states them in
_FIELD_UNITS: dict[str, str] = {
    "util_gpu": "%",
    "util_mem": "%",
    "util_enc": "%",
    "util_dec": "%",
    "mem_total_bytes": "By",
    "mem_used_bytes": "By",
    "mem_free_bytes": "By",
    "mem_reserved_bytes": "By",
    "power_w": "W",
    "power_limit_w": "W",
    "energy_j": "J",
    "temp_gpu_c": "Cel",
    "temp_mem_c": "Cel",
    "clock_sm_mhz": "MHz",
    "clock_mem_mhz": "MHz",
    "violation_power_ns": "ns",
    "violation_thermal_ns": "ns",
    "ecc_corrected_volatile": "{error}",
    "ecc_uncorrected_volatile": "{error}",
    "ecc_corrected_aggregate": "{error}",
    "ecc_uncorrected_aggregate": "{error}",
    "retired_pages_sbe": "{page}",
    "retired_pages_dbe": "{page}",
    "retired_pages_pending": "1",
    "remapped_rows_correctable": "{row}",
    "remapped_rows_uncorrectable": "{row}",
    "remapped_rows_failure": "1",
    "pcie_tx_bytes_s": "By/s",
    "pcie_rx_bytes_s": "By/s",
    "pcie_replay_counter": "{replay}",
    "prof_gr_engine_active": "1",
    "prof_pipe_tensor_active": "1",
    "prof_dram_active": "1",
}


def _nvlink_bytes(g: GpuReading, _v: View) -> Iterator[Series]:
    if g.nvlink_tx_bytes is not None or g.nvlink_rx_bytes is not None:
        yield (), float((g.nvlink_tx_bytes or 0) + (g.nvlink_rx_bytes or 0))


_NVLINK_ERRORS: tuple[NvLinkCounter, ...] = ("crc_flit_errors", "crc_data_errors", "replay_errors", "recovery_errors")


def _nvlink_errors(counter: NvLinkCounter) -> Callable[[GpuReading, View], Iterator[Series]]:
    def read(g: GpuReading, _v: View) -> Iterator[Series]:
        total = g.nvlink_error_total(counter)
        if total is not None:
            yield (), float(total)

    return read


def _xid_last(g: GpuReading, v: View) -> Iterator[Series]:
    last = v.observed.xid_last.get(g.index)
    yield ((str(last.code), last.message), float(last.code)) if last else NO_XID


def _xid_count(g: GpuReading, v: View) -> Iterator[Series]:
    for code, n in sorted(v.observed.xid_counts.get(g.index, {}).items()):
        yield (str(code),), float(n)


def _states(current: str, states: tuple[str, ...]) -> Iterator[Series]:
    for state in states:
        yield (state,), 1.0 if state == current else 0.0


def _leak(attr: str) -> Callable[[GpuReading, View], Iterator[Series]]:
    def read(g: GpuReading, v: View) -> Iterator[Series]:
        report = v.observed.leak.get(g.index)
        if report is not None:
            yield (), float(getattr(report, attr))

    return read


def _sample_age(v: View) -> Iterator[Series]:
    if v.sample_monotonic is not None:
        yield (), max(0.0, v.now_monotonic - v.sample_monotonic)


def _node_health(v: View) -> Iterator[Series]:
    if v.sample is not None:
        yield from _states(v.sample.health, HEALTH_STATES)


def _spool_lost(v: View) -> Iterator[Series]:
    for cause, n in v.spool.losses().items():
        yield (cause,), float(n)


def _workers(v: View) -> Iterator[Series]:
    workers = (v.sample.workers if v.sample else None) or []
    for phase in WORKER_PHASES:
        yield (phase,), float(sum(1 for w in workers if w.state == phase))


def _busbw(v: View) -> Iterator[Series]:
    points = v.observed.probe.report.points if v.observed.probe else []
    if points:
        yield (), max(points, key=lambda p: p.size_bytes).busbw_gbps


def _probe_age(v: View) -> Iterator[Series]:
    if v.observed.probe is not None:
        yield (), max(0.0, v.now_monotonic - v.observed.probe.monotonic)


def _one(read: Callable[[View], float]) -> Callable[[View], Iterator[Series]]:
    def series(v: View) -> Iterator[Series]:
        yield (), float(read(v))

    return series


SOURCES: dict[str, Source] = {
    **{f"gpu.{name}": Source(unit, gpu=_field(name)) for name, unit in _FIELD_UNITS.items()},
    "gpu.nvlink_bytes": Source("By", gpu=_nvlink_bytes),
    **{f"gpu.nvlink_{c}": Source("{error}", gpu=_nvlink_errors(c)) for c in _NVLINK_ERRORS},
    "gpu.xid_last": Source("{xid}", gpu=_xid_last),
    "gpu.xid_count": Source("{xid}", gpu=_xid_count),
    "gpu.health": Source("1", gpu=lambda g, _v: _states(g.health, HEALTH_STATES)),
    "gpu.leak_slope": Source("%/h", gpu=_leak("slope_pct_per_h")),
    "gpu.leak_lower": Source("%/h", gpu=_leak("lower_pct_per_h")),
    "gpu.leak_upper": Source("%/h", gpu=_leak("upper_pct_per_h")),
    "gpu.leak_threshold": Source("%/h", gpu=_leak("threshold_pct_per_h")),
    "gpu.leak_alert": Source("1", gpu=_leak("alert")),
    "node.sample_age_s": Source("s", node=_sample_age),
    "node.health": Source("1", node=_node_health),
    "node.spool_pending": Source("{record}", node=_one(lambda v: v.spool.pending_records)),
    "node.spool_bytes": Source("By", node=_one(lambda v: v.spool.bytes)),
    "node.spool_max_bytes": Source("By", node=_one(lambda v: v.spool.max_bytes)),
    "node.spool_lost": Source("{record}", node=_spool_lost),
    "node.events_sent": Source("{event}", node=_one(lambda v: v.sender.sent)),
    "node.events_failed": Source("{batch}", node=_one(lambda v: v.sender.failed_batches)),
    "node.kafka_up": Source("1", node=_one(lambda v: v.sender.kafka == "ok")),
    "node.workers": Source("{worker}", node=_workers),
    "node.nccl_busbw": Source("GBy/s", node=_busbw),
    "node.nccl_probe_age_s": Source("s", node=_probe_age),
}
