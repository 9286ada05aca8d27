"""How ``myolo-agent sample`` shows a sample: a table for a person, JSON (the event payload) for a program.

An absent field prints as an em dash, never as 0, for the same reason it is absent in the payload: a GPU
that cannot report a value has not reported zero.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from myolo.events.payloads import GpuReading, NodeSample

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
    up = r.nvlink_up
    return ABSENT if up is None else f"{up[0]}/{up[1]}"


def _procs(r: GpuReading) -> str:
    if r.processes is None:
        return ABSENT
    return str(len(r.processes))


def _health(level: str, reasons: list[str]) -> Text:
    return Text(level + (f": {'; '.join(reasons)}" if reasons else ""), style=_STYLE.get(level, ""))


# (header, cell, give-way rank) in display order: on a narrow terminal, ranked columns give way, 1 first;
# unranked ones (None) always stay
_COLUMNS: tuple[tuple[str, Callable[[GpuReading], str | Text], int | None], ...] = (
    ("gpu", lambda r: str(r.index), None),
    ("name", lambda r: r.name, None),
    ("util\n%", lambda r: _fmt(r.util_gpu, lambda v: f"{v:.0f}"), None),
    ("mem GiB\nused/total", _mem, None),
    ("power W\nnow/limit", _power, 6),
    ("temp °C\ngpu/mem", _temps, 7),
    ("sm\nMHz", lambda r: _fmt(r.clock_sm_mhz), 4),
    ("clock\nevents", lambda r: _fmt(r.clock_event_reasons, lambda v: ",".join(v) or "none"), None),
    ("ecc\nunc/corr", _ecc, 8),
    ("remap\nunc/corr", _remap, 3),
    ("pcie", _pcie, 1),
    ("nvlink\nup/all", _nvlink, 2),
    ("procs", _procs, 5),
    ("health", lambda r: _health(r.health, r.health_reasons), None),
)
_GIVE_WAY = [header for header, _, rank in sorted((c for c in _COLUMNS if c[2] is not None), key=lambda c: c[2])]
_HEALTH_MIN = 12  # the health column folds its reasons; it needs this much to show the level


def _natural_width(header: str, cells: list[str | Text]) -> int:
    """Columns a column takes unfolded: its widest line, plus padding and the border."""
    widest = max(cell_len(str(c)) for c in [*header.split("\n"), *cells])
    return (min(widest, _HEALTH_MIN) if header == "health" else widest) + 3


def _fit(cells: dict[str, list[str | Text]], width: int | None) -> tuple[list[str], list[str]]:
    """The headers that fit ``width`` without folding a value, and the names of those left out."""
    shown = list(cells)
    hidden: list[str] = []
    drops = iter(_GIVE_WAY)
    while width is not None and 1 + sum(_natural_width(h, cells[h]) for h in shown) > width:
        header = next(drops, None)
        if header is None:
            break  # what is left folds: gpu, name, util, mem, clock events and health stay
        shown.remove(header)
        hidden.append(header.split("\n")[0])
    return shown, hidden


def sample_table(sample: NodeSample, width: int | None = None) -> Table:
    """One row per GPU with the fields an operator checks first; the full record is in ``--json``.

    Given the terminal's ``width``, the least urgent columns (PCIe, NVLink, remapped rows, clocks, ...) give
    way rather than fold every value into a column of fragments; the caption names those left out."""
    title = (
        f"{sample.node_id}  backend={sample.backend}  driver={sample.driver_version or ABSENT}  "
        f"cuda={sample.cuda_version or ABSENT}"
    )
    cells = {header: [cell(r) for r in sample.gpus] for header, cell, _ in _COLUMNS}
    shown, hidden = _fit(cells, width)
    caption = _health(sample.health, sample.health_reasons)
    if hidden:
        caption.append(f"\nhidden at this width: {', '.join(hidden)} (see --json)", style="dim")
    table = Table(title=title, caption=caption, caption_justify="left")
    for header in shown:
        table.add_column(header, overflow="fold")
    for i in range(len(sample.gpus)):
        table.add_row(*(cells[header][i] for header in shown))
    return table


def print_sample(sample: NodeSample, as_json: bool = False, console: Console | None = None) -> None:
    """What ``myolo-agent sample [--json]`` writes to stdout."""
    if as_json:
        print(sample_json(sample))
        return
    console = console or Console()
    console.print(sample_table(sample, width=console.width))
