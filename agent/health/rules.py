"""Per-GPU health rules: pure functions of the current reading, the previous one and the time between.

The thresholds are DCGM's (see the notes). Rules about *growth* (NVLink errors, PCIe replays, violation
time) need the previous reading; with none, or after a counter went backwards (driver reload), they are
silent rather than guessing. An absent field never triggers a rule.
"""

from __future__ import annotations

from myolo.agent.health.model import Finding
from myolo.events.payloads import GpuReading

RETIRED_PAGES_FAIL = 63
UNCORRECTABLE_REMAPS_WARN = 512
PCIE_BER = 1e-12  # bit errors per bit that PCIe tolerates
PCIE_LANE_GT_S: dict[int, float] = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def memory_findings(r: GpuReading) -> list[Finding]:
    """ECC, page retirement and row remapping: state rules that need no history."""
    out = []
    if r.ecc_uncorrected_volatile:
        out.append(Finding("fail", f"volatile double-bit ECC errors: {r.ecc_uncorrected_volatile}"))
    if r.retired_pages_sbe is not None or r.retired_pages_dbe is not None:
        retired = (r.retired_pages_sbe or 0) + (r.retired_pages_dbe or 0)
        if retired >= RETIRED_PAGES_FAIL:
            out.append(Finding("fail", f"retired pages {retired} >= {RETIRED_PAGES_FAIL}"))
    if r.retired_pages_pending:
        out.append(Finding("warn", "page retirement pending (reset the GPU to retire)"))
    if r.remapped_rows_failure:
        out.append(Finding("fail", "row remapping failed"))
    if r.remapped_rows_uncorrectable is not None and r.remapped_rows_uncorrectable >= UNCORRECTABLE_REMAPS_WARN:
        out.append(
            Finding("warn", f"uncorrectable row remaps {r.remapped_rows_uncorrectable} >= {UNCORRECTABLE_REMAPS_WARN}")
        )
    if r.remapped_rows_pending:
        out.append(Finding("warn", "row remap pending (reset the GPU to apply)"))
    return out


def _grew(cur: int | None, prev: int | None) -> int:
    """Increase of a cumulative counter; 0 when either side is absent or it went backwards (reset)."""
    if cur is None or prev is None or cur < prev:
        return 0
    return cur - prev


def nvlink_findings(cur: GpuReading, prev: GpuReading | None) -> list[Finding]:
    """Any growth of a link's replay or recovery errors fails the GPU. Either reading may be in the published
    form: a link it does not list is up with zero errors (see :class:`GpuReading`)."""
    if prev is None or not cur.nvlink:
        return []
    out = []
    for nl in cur.nvlink:
        old = prev.nvlink_link(nl.link)
        if old is None:
            continue
        for attr, label in (("replay_errors", "replay"), ("recovery_errors", "recovery")):
            grown = _grew(getattr(nl, attr), getattr(old, attr))
            if grown:
                out.append(Finding("fail", f"nvlink {nl.link} {label} errors grew by {grown}"))
    return out


def pcie_replay_limit_per_min(gen: int | None, width: int | None) -> float | None:
    """Replays per minute PCIe may show at its bit error rate: 1e-12 x lane rate x 60 s x lanes."""
    if gen is None or width is None or gen not in PCIE_LANE_GT_S or width <= 0:
        return None
    return PCIE_BER * PCIE_LANE_GT_S[gen] * 1e9 * 60.0 * width


def pcie_findings(
    cur: GpuReading, base_counter: int | None, window_s: float, min_window_s: float = 60.0
) -> list[Finding]:
    """Replay rate over ``window_s`` seconds since the counter read ``base_counter``. The limit is per
    minute, so a window shorter than ``min_window_s`` gives no verdict (one replay in a 1 s sample is not
    60 a minute)."""
    if base_counter is None or window_s < min_window_s:
        return []
    grown = _grew(cur.pcie_replay_counter, base_counter)
    limit = pcie_replay_limit_per_min(cur.pcie_link_gen, cur.pcie_link_width)
    if not grown or limit is None:
        return []
    rate = grown / (window_s / 60.0)
    if rate > limit:
        return [
            Finding(
                "warn",
                f"pcie replays {rate:.1f}/min above {limit:.1f}/min for gen{cur.pcie_link_gen} x{cur.pcie_link_width}",
            )
        ]
    return []


def violation_findings(cur: GpuReading, prev: GpuReading | None) -> list[Finding]:
    """Clocks held back for power or thermal reasons since the last sample."""
    if prev is None:
        return []
    out = []
    for attr, label in (("violation_thermal_ns", "thermal"), ("violation_power_ns", "power")):
        grown = _grew(getattr(cur, attr), getattr(prev, attr))
        if grown:
            out.append(Finding("warn", f"{label} violation time grew by {grown / 1e9:.2f} s"))
    return out


def backend_findings(r: GpuReading) -> list[Finding]:
    """What the backend itself flagged (a GPU it could not read) survives the rules."""
    return [Finding(r.health, reason) for reason in r.health_reasons]


def gpu_findings(cur: GpuReading, prev: GpuReading | None) -> list[Finding]:
    """Every per-GPU rule that compares with the previous sample (``prev``: same GPU, same uuid, or None).
    PCIe replays are judged over a minute-long window: see :func:`pcie_findings`."""
    return [
        *backend_findings(cur),
        *memory_findings(cur),
        *nvlink_findings(cur, prev),
        *violation_findings(cur, prev),
    ]
