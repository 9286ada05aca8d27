"""One registry of op backends, tried in order per op, with per-device/dtype availability.

Why a registry and not `try: import apex`: the best kernel depends on the device, the dtype and whether
the input is a DTensor, and users must be able to force an order when a kernel misbehaves. Selection is
resolved once per (op, device type, dtype, DTensor-ness) and cached, so the per-call cost is a dict lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog
import torch

from myolo.kernels.ops.backends.base import Backend

OPS: tuple[str, ...] = ("rms_norm", "residual_rms_norm", "layer_norm", "cross_entropy", "attention", "adamw")
DEFAULT_ORDER: tuple[str, ...] = ("apex", "native", "triton", "reference")
ALL_OPS_KEY = "*"

log = structlog.get_logger("myolo.kernels.ops")


@dataclass
class _State:
    order: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict.fromkeys(OPS, DEFAULT_ORDER))
    cache: dict[tuple[str, str, torch.dtype, bool], tuple[str, Callable[..., Any]]] = field(default_factory=dict)
    used: dict[str, str] = field(default_factory=dict)
    logged: set[tuple[str, str]] = field(default_factory=set)


_state = _State()
_backends: dict[str, Backend] | None = None


def backends() -> dict[str, Backend]:
    """name -> Backend, imported lazily (backends import torch submodules we do not want at import time)."""
    global _backends
    if _backends is None:
        from myolo.kernels.ops.backends import apex_backend, native, reference, triton_backend

        found = (apex_backend.BACKEND, native.BACKEND, triton_backend.BACKEND, reference.BACKEND)
        _backends = {b.name: b for b in found}
    return _backends


def availability(op: str, device: torch.device | str, dtype: torch.dtype, dtensor: bool = False) -> dict[str, str]:
    """backend -> "available" or why not, for one op (used by logs, benchmark and gpu_check)."""
    _check_op(op)
    device = torch.device(device)
    out = {}
    for name, b in backends().items():
        if op not in b.impls:
            out[name] = f"{name} has no {op}"
        elif dtensor and not b.dtensor_capable:
            out[name] = "not DTensor-capable"
        else:
            out[name] = b.unavailable(op, device, dtype) or "available"
    return out


def resolve(op: str, device: torch.device, dtype: torch.dtype, dtensor: bool = False) -> tuple[str, Callable]:
    """The first usable backend for op in the configured order, as (name, implementation)."""
    key = (op, device.type, dtype, dtensor)
    hit = _state.cache.get(key)
    if hit is not None:
        return hit
    reasons = {}
    for name in _state.order[op]:
        b = backends()[name]
        if op not in b.impls:
            reasons[name] = f"{name} has no {op}"
            continue
        if dtensor and not b.dtensor_capable:
            reasons[name] = "not DTensor-capable"
            continue
        why = b.unavailable(op, device, dtype)
        if why is None:
            _state.cache[key] = (name, b.impls[op])
            return name, b.impls[op]
        reasons[name] = why
    # Unreachable with the reference in the order (configure always keeps it); kept for a clear message.
    raise RuntimeError(f"no backend usable for {op} on {device.type}/{dtype}: {reasons}")


def note_used(op: str, name: str) -> None:
    """Record what a call actually used; log once per (op, backend) so a switch (e.g. DTensor) is visible."""
    _state.used[op] = name
    if (op, name) not in _state.logged and not torch.compiler.is_compiling():
        _state.logged.add((op, name))
        log.info("op backend used", op=op, backend=name)


def configure(
    prefer: Mapping[str, Iterable[str]] | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> dict[str, str]:
    """Set the backend order and resolve every op for (device, dtype); logs the choice once.

    prefer maps an op name (or "*" for all ops) to the backends to try, in order; those replace the default
    order for that op, and "reference" is appended as the last resort when not listed, so an op always runs.
    """
    names = list(backends())
    order = dict.fromkeys(OPS, DEFAULT_ORDER)
    for op, listed in (prefer or {}).items():
        if op != ALL_OPS_KEY:
            _check_op(op)
        if isinstance(listed, str):
            listed = [listed]
        listed = list(listed)
        for name in listed:
            if name not in names:
                raise ValueError(
                    f"myolo.kernels.ops.configure: unknown backend {name!r} in prefer[{op!r}]; "
                    f"valid backends are {', '.join(names)}"
                )
        if not listed:
            raise ValueError(f"myolo.kernels.ops.configure: prefer[{op!r}] is empty; list at least one of {names}")
        chosen = tuple(dict.fromkeys([*listed, "reference"]))
        for target in OPS if op == ALL_OPS_KEY else (op,):
            if op == ALL_OPS_KEY and target in (prefer or {}):
                continue  # an op's own entry beats "*"
            order[target] = chosen
    device = torch.device(device)
    _state.order = order
    _state.cache.clear()
    _state.used.clear()
    _state.logged.clear()
    selected, passed_over = {}, {}
    for op in OPS:
        name, _ = resolve(op, device, dtype)
        selected[op] = name
        _state.used[op] = name
        _state.logged.add((op, name))
        reasons = availability(op, device, dtype)
        # Why a preferred backend was passed over (e.g. "apex has no compiled extension") matters on a GPU
        # node; "X has no op" is structural and not worth a log field.
        why = {n: reasons[n] for n in order[op][: order[op].index(name)] if not reasons[n].endswith(f"no {op}")}
        if why:
            passed_over[op] = why
    dtype_name = str(dtype).removeprefix("torch.")
    log.info("op backends selected", device=device.type, dtype=dtype_name, selected=selected, passed_over=passed_over)
    return selected


def selected_backends() -> dict[str, str]:
    return dict(_state.used)


def reset() -> None:
    """Back to the default order with nothing selected (tests)."""
    global _state
    _state = _State()


def _check_op(op: str) -> None:
    if op not in OPS:
        raise ValueError(f"myolo.kernels.ops: unknown op {op!r}; valid ops are {', '.join(OPS)} (or '*' for all)")
