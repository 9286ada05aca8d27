"""Every NVML call goes through :class:`NvmlCaller`, which turns failures into *absent* fields.

Why a wrapper and not try/except at each call site: the rules are the same everywhere and easy to get
wrong once in forty places.

- ``NotSupported`` (or a symbol the driver/bindings lack) means the GPU cannot give this field: the value
  is ``None``, never zero, and the call is not repeated for that GPU (a static property of the device, and
  skipping it keeps a sample cheap).
- Newer call variants (``_v3``, ``_v2``) are tried first; whichever answers is remembered per GPU and
  field (GPUs of one node may differ: a fallback on one must not cost another its richer variant).
- Any other NVML error (no permission, unknown, timeout) makes only that field absent for this sample,
  is counted, and is logged once per GPU and field, so a flaky counter never stops the rest of a reading.
- ``GpuIsLost`` aborts the reading of that one GPU (:class:`GpuLost`): every further call would fail.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import structlog

log = structlog.get_logger("myolo.agent.gpu")


class GpuLost(Exception):
    """The GPU stopped answering (fallen off the bus, needs a reset)."""


class NvmlCaller:
    """Wraps calls into one pynvml-like module ``lib`` (the real ``pynvml`` or a test double)."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.errors: Counter[str] = Counter()
        self._unsupported: set[tuple[int, str]] = set()
        self._variant: dict[tuple[int, str], int] = {}
        self._logged: set[tuple[int, str]] = set()
        self._not_supported = _error_class(lib, "NVMLError_NotSupported")
        self._function_not_found = _error_class(lib, "NVMLError_FunctionNotFound")
        self._gpu_is_lost = _error_class(lib, "NVMLError_GpuIsLost")
        self._base = getattr(lib, "NVMLError", Exception)

    def get(self, gpu: int, field: str, *variants: Callable[[], Any]) -> Any | None:
        """Value of the first variant that answers, or ``None`` when the field is absent/failed."""
        if (gpu, field) in self._unsupported:
            return None
        order = range(len(variants))
        first = self._variant.get((gpu, field))
        if first is not None and first < len(variants):
            order = [first, *(i for i in order if i != first)]
        for i in order:
            try:
                value = variants[i]()
            except (AttributeError, self._function_not_found, self._not_supported):
                continue
            except self._gpu_is_lost as e:
                raise GpuLost(str(e)) from e
            except self._base as e:
                self._record(gpu, field, e)
                return None
            except (TypeError, ValueError, OSError) as e:  # odd ctypes returns: still only this field
                self._record(gpu, field, e)
                return None
            self._variant[(gpu, field)] = i
            return value
        self._unsupported.add((gpu, field))
        return None

    def supported(self, gpu: int, field: str) -> bool:
        return (gpu, field) not in self._unsupported

    def _record(self, gpu: int, field: str, e: BaseException) -> None:
        self.errors[field] += 1
        if (gpu, field) not in self._logged:
            self._logged.add((gpu, field))
            log.warning(
                "nvml: field failed; reported as absent", gpu=gpu, field=field, error=f"{type(e).__name__}: {e}"
            )


def _error_class(lib: Any, name: str) -> type[BaseException]:
    """The named NVMLError subclass, or a private class nothing raises when the module lacks it."""
    cls = getattr(lib, name, None)
    if isinstance(cls, type) and issubclass(cls, BaseException):
        return cls
    return type(f"_Missing{name}", (Exception,), {})


def text(value: Any) -> str:
    """NVML strings come back as ``bytes`` from some binding versions and ``str`` from others."""
    return value.decode(errors="replace") if isinstance(value, bytes | bytearray) else str(value)
