"""How ``myolo-agent sample`` shows a sample: a table for a person, JSON (the event payload) for a program.

An absent field prints as an em dash, never as 0, for the same reason it is absent in the payload: a GPU
that cannot report a value has not reported zero.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table
from rich.text import Text

from events.payloads import GpuReading, NodeSample

ABSENT = "—"
GiB = 1 << 30
_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}


def sample_json(sample: NodeSample, pretty: bool = True) -> str:
    """The sample as the JSON of its event payload (absent fields omitted)."""
    raw = msgspec.json.encode(sample)
    return msgspec.json.format(raw, indent=2).decode() if pretty else raw.decode()


def _fmt(value: Any, f: Callable[[Any], str] = str) -> str:
    return ABSENT if value is None else f(value)


def _mem(r: GpuReading) -> str:
    if r.mem_used_bytes is None and r.mem_total_bytes is None:
        return ABSENT
    return f"{_fmt(r.mem_used_bytes, lambda v: f'{v / GiB:.1f}')}/{_fmt(r.mem_total_bytes, lambda v: f'{v / GiB:.0f}')}"


def _power(r: GpuReading) -> str:
    if r.power_w is None:
        return ABSENT
    return f"{r.power_w:.0f}/{_fmt(r.power_limit_w, lambda v: f'{v:.0f}')}"


def _temps(r: GpuReading) -> str:
    if r.temp_gpu_c is None and r.temp_mem_c is None:
        return ABSENT
    return f"{_fmt(r.temp_gpu_c, lambda v: f'{v:.0f}')}/{_fmt(r.temp_mem_c, lambda v: f'{v:.0f}')}"


def _ecc(r: GpuReading) -> str:
    if r.ecc_uncorrected_volatile is None and r.ecc_corrected_volatile is None:
        return ABSENT
    return f"{_fmt(r.ecc_uncorrected_volatile)}/{_fmt(r.ecc_corrected_volatile)}"


def _remap(r: GpuReading) -> str:
    if r.remapped_rows_uncorrectable is None:
        return ABSENT
    flags = ("P" if r.remapped_rows_pending else "") + ("F" if r.remapped_rows_failure else "")
    return f"{r.remapped_rows_uncorrectable}/{_fmt(r.remapped_rows_correctable)}{(' ' + flags) if flags else ''}"


def _pcie(r: GpuReading) -> str:
    if r.pcie_link_gen is None and r.pcie_link_width is None:
        return ABSENT
    return f"gen{_fmt(r.pcie_link_gen)} x{_fmt(r.pcie_link_width)}"


def _nvlink(r: GpuReading) -> str:
    if r.nvlink is None:
        return ABSENT
    return f"{sum(1 for nl in r.nvlink if nl.active)}/{len(r.nvlink)}"


def _procs(r: GpuReading) -> str:
    if r.processes is None:
        return ABSENT
    return str(len(r.processes))


def _health(level: str, reasons: list[str]) -> Text:
    return Text(level + (f": {'; '.join(reasons)}" if reasons else ""), style=_STYLE.get(level, ""))


def sample_table(sample: NodeSample) -> Table:
    """One row per GPU with the fields an operator checks first; the full record is in ``--json``."""
    title = (
        f"{sample.node_id}  backend={sample.backend}  driver={sample.driver_version or ABSENT}  "
        f"cuda={sample.cuda_version or ABSENT}"
    )
    table = Table(title=title, caption=_health(sample.health, sample.health_reasons), caption_justify="left")
    columns = (
        "gpu",
        "name",
        "util %",
        "mem GiB",
        "power W",
        "temp °C",
        "sm MHz",
        "clock events",
        "ecc unc/corr",
        "remap unc/corr",
        "pcie",
        "nvlink",
        "procs",
        "health",
    )
    for c in columns:
        table.add_column(c, overflow="fold")
    for r in sample.gpus:
        table.add_row(
            str(r.index),
            r.name,
            _fmt(r.util_gpu, lambda v: f"{v:.0f}"),
            _mem(r),
            _power(r),
            _temps(r),
            _fmt(r.clock_sm_mhz),
            _fmt(r.clock_event_reasons, lambda v: ",".join(v) or "none"),
            _ecc(r),
            _remap(r),
            _pcie(r),
            _nvlink(r),
            _procs(r),
            _health(r.health, r.health_reasons),
        )
    return table


def print_sample(sample: NodeSample, as_json: bool = False, console: Console | None = None) -> None:
    """What ``myolo-agent sample [--json]`` writes to stdout."""
    if as_json:
        print(sample_json(sample))
        return
    (console or Console()).print(sample_table(sample))
