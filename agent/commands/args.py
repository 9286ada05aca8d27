"""Arguments of each command action, checked before the agent takes the command.

Why here and not in the daemon: a command that cannot run must be *rejected* (nothing happened, the
coordinator may fix and resend under a new id), never accepted and then failed. So every argument is checked
first, and an error names the field (``args.interval_s``), the reason, and what to send instead. The parsed
values are the keyword arguments of the daemon's action callable:

- ``set_interval``: ``interval_s`` (seconds, 0.05..3600) -> ``set_interval(interval_s=float)``
- ``report_sample``: no arguments -> ``report_sample()``
- ``nccl_probe``: ``world_size`` (2..64, default 2), ``sizes`` (byte counts), optional ``backend``
  (auto/gloo/nccl), ``iters``, ``warmup``, ``dtype``, ``timeout_s`` -> ``nccl_probe(spec=ProbeSpec,
  timeout_s=float, command_id=str)``
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agent.nccl.probe import ProbeSpec
from events.payloads import Command

MIN_INTERVAL_S, MAX_INTERVAL_S = 0.05, 3600.0
MAX_WORLD_SIZE = 64
MAX_SIZES = 32
MAX_SIZE_BYTES = 8 << 30
MAX_PROBE_TIMEOUT_S = 3600.0
DEFAULT_PROBE_TIMEOUT_S = 300.0
_PROBE = ProbeSpec()  # its defaults (a slots dataclass has no class-level default values)


class ArgsError(ValueError):
    """A command argument that is missing or wrong. ``field`` is e.g. ``args.interval_s``."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


def _number(args: Mapping[str, Any], name: str, lo: float, hi: float, default: float | None = None) -> float:
    value = args.get(name, default)
    if value is None:
        raise ArgsError(f"args.{name}", f"missing; send a number of seconds between {lo:g} and {hi:g}")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgsError(f"args.{name}", f"must be a number, got {type(value).__name__} {value!r}")
    if not lo <= value <= hi:
        raise ArgsError(f"args.{name}", f"must be between {lo:g} and {hi:g}, got {value!r}")
    return float(value)


def _integer(args: Mapping[str, Any], name: str, lo: int, hi: int, default: int) -> int:
    value = args.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgsError(f"args.{name}", f"must be an integer, got {type(value).__name__} {value!r}")
    if not lo <= value <= hi:
        raise ArgsError(f"args.{name}", f"must be between {lo} and {hi}, got {value}")
    return value


def _choice(args: Mapping[str, Any], name: str, choices: tuple[str, ...], default: str) -> str:
    value = args.get(name, default)
    if value not in choices:
        raise ArgsError(f"args.{name}", f"must be one of {', '.join(choices)}, got {value!r}")
    return value


def _only(args: Mapping[str, Any], action: str, known: tuple[str, ...]) -> None:
    unknown = sorted(set(args) - set(known))
    if unknown:
        expected = ", ".join(known) if known else "no arguments"
        raise ArgsError(f"args.{unknown[0]}", f"unknown argument for {action}; it takes {expected}")


def set_interval_args(cmd: Command) -> dict[str, Any]:
    _only(cmd.args, "set_interval", ("interval_s",))
    return {"interval_s": _number(cmd.args, "interval_s", MIN_INTERVAL_S, MAX_INTERVAL_S)}


def report_sample_args(cmd: Command) -> dict[str, Any]:
    _only(cmd.args, "report_sample", ())
    return {}


def _sizes(args: Mapping[str, Any]) -> tuple[int, ...]:
    if "sizes" not in args:
        return _PROBE.sizes
    sizes = args["sizes"]
    if not isinstance(sizes, list) or not sizes:
        raise ArgsError("args.sizes", f"must be a non-empty list of byte counts, got {sizes!r}")
    if len(sizes) > MAX_SIZES:
        raise ArgsError("args.sizes", f"at most {MAX_SIZES} sizes per probe, got {len(sizes)}")
    for i, size in enumerate(sizes):
        if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= MAX_SIZE_BYTES:
            raise ArgsError(f"args.sizes[{i}]", f"must be a byte count between 1 and {MAX_SIZE_BYTES}, got {size!r}")
    return tuple(sizes)


def nccl_probe_args(cmd: Command) -> dict[str, Any]:
    known = ("world_size", "sizes", "backend", "iters", "warmup", "dtype", "timeout_s")
    _only(cmd.args, "nccl_probe", known)
    spec = ProbeSpec(
        world_size=_integer(cmd.args, "world_size", 2, MAX_WORLD_SIZE, _PROBE.world_size),
        backend=_choice(cmd.args, "backend", ("auto", "gloo", "nccl"), _PROBE.backend),  # type: ignore[arg-type]
        sizes=_sizes(cmd.args),
        warmup=_integer(cmd.args, "warmup", 0, 100, _PROBE.warmup),
        iters=_integer(cmd.args, "iters", 1, 1000, _PROBE.iters),
        dtype=_choice(cmd.args, "dtype", ("float32", "float16", "bfloat16"), _PROBE.dtype),
    )
    timeout = _number(cmd.args, "timeout_s", 1.0, MAX_PROBE_TIMEOUT_S, DEFAULT_PROBE_TIMEOUT_S)
    return {"spec": spec, "timeout_s": timeout, "command_id": cmd.command_id}


PARSERS: dict[str, Callable[[Command], dict[str, Any]]] = {
    "set_interval": set_interval_args,
    "report_sample": report_sample_args,
    "nccl_probe": nccl_probe_args,
}
