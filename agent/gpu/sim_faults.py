"""Fault state of one simulated GPU, and the parsing/validation of what an operator asks to inject.

The daemon's control socket (``myolo-agent inject``) turns its arguments into calls on
:class:`~myolo.agent.gpu.sim.SimBackend`; the validation lives here so the socket, tests and demos all get the
same clear errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Throttle = Literal["thermal", "power"]
THROTTLES: tuple[str, ...] = ("thermal", "power")

# XIDs that change what the simulated GPU reports, beyond the event itself.
XID_DBE = 48  # double-bit ECC error
XID_REMAP_PENDING = 63  # row remapping recorded, pending a reset
XID_REMAP_FAILURE = 64  # row remapping failed
XID_OFF_BUS = 79  # fallen off the bus
XID_CONTAINED = 94  # contained ECC error
XID_UNCONTAINED = 95  # uncontained ECC error
MAX_XID = 999


@dataclass
class GpuFaults:
    """What has been injected into one GPU and is still in force."""

    util_override: float | None = None  # fraction 0..1
    leak_rate_pct_h: float = 0.0  # % of the GPU's memory per hour, added to a process
    throttle: Throttle | None = None
    lost: bool = False  # fell off the bus (XID 79): reads fail until cleared

    def active(self) -> list[str]:
        """Human-readable list, for the control socket's answer and logs."""
        out = []
        if self.util_override is not None:
            out.append(f"util={self.util_override * 100:g}%")
        if self.leak_rate_pct_h:
            out.append(f"leak={self.leak_rate_pct_h:g}%/h")
        if self.throttle:
            out.append(f"throttle={self.throttle}")
        if self.lost:
            out.append("lost")
        return out


_LEAK_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(%)?\s*(?:/\s*(h|hr|hour))?\s*$", re.IGNORECASE)


def parse_leak_rate(value: str | float) -> float:
    """``"0.5%/h"``, ``"0.5%"``, ``"0.5"`` or ``0.5`` -> 0.5 (percent of GPU memory per hour)."""
    if isinstance(value, int | float):
        rate = float(value)
    else:
        m = _LEAK_RE.match(value)
        if not m:
            raise ValueError(f"--leak-rate {value!r}: expected a percentage of GPU memory per hour such as '0.5%/h'")
        rate = float(m.group(1))
    return check_leak_rate(rate)


def check_leak_rate(rate: float) -> float:
    if not 0.0 <= rate <= 100.0:
        raise ValueError(f"--leak-rate {rate:g}%/h: must be between 0 and 100 %/h (0 stops the leak)")
    return rate


def check_util(pct: float | None) -> float | None:
    """Percent (0..100) -> fraction, ``None`` removes the override."""
    if pct is None:
        return None
    if not 0.0 <= pct <= 100.0:
        raise ValueError(f"--util {pct:g}: utilisation must be between 0 and 100 (percent)")
    return pct / 100.0


def check_throttle(kind: str | None) -> Throttle | None:
    if kind is None or kind == "none":
        return None
    if kind not in THROTTLES:
        raise ValueError(f"--throttle {kind!r}: expected one of thermal, power, none")
    return kind  # type: ignore[return-value]


def check_xid(xid: int) -> int:
    if not isinstance(xid, int) or isinstance(xid, bool) or not 1 <= xid <= MAX_XID:
        raise ValueError(f"--xid {xid!r}: an XID is a whole number between 1 and {MAX_XID}")
    return xid


def check_gpu(gpu: int | None, count: int) -> list[int]:
    """Indices to act on: one GPU, or all of them when ``gpu`` is None."""
    if gpu is None:
        return list(range(count))
    if not isinstance(gpu, int) or isinstance(gpu, bool) or not 0 <= gpu < count:
        raise ValueError(f"--gpu {gpu!r}: this node has {count} simulated GPUs (indices 0..{count - 1})")
    return [gpu]
