"""Clock-event (throttle) reasons: NVML's bitmask decoded to stable snake_case names.

Names, not bits, go into samples so a dashboard or rule never needs NVML's header to read them.
"""

from __future__ import annotations

CLOCK_EVENT_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)

THERMAL_REASONS = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown"})
POWER_REASONS = frozenset({"sw_power_cap", "hw_power_brake_slowdown"})


def decode_clock_event_reasons(mask: int) -> list[str]:
    """Names of the set bits, in bit order; bits NVML may add later appear as ``bit_0x...``."""
    names = [name for bit, name in CLOCK_EVENT_REASONS if mask & bit]
    known = 0
    for bit, _ in CLOCK_EVENT_REASONS:
        known |= bit
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"bit_{bit:#x}")
            rest &= ~bit
        bit <<= 1
    return names


def encode_clock_event_reasons(names: list[str]) -> int:
    """Inverse of :func:`decode_clock_event_reasons` for known names (the simulator uses it)."""
    by_name = {name: bit for bit, name in CLOCK_EVENT_REASONS}
    mask = 0
    for name in names:
        if name not in by_name:
            raise ValueError(f"unknown clock-event reason {name!r}; known: {', '.join(sorted(by_name))}")
        mask |= by_name[name]
    return mask
