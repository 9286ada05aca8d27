"""What an op backend is. Here, below both the registry and the backends, so each imports it one way."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Backend:
    name: str
    impls: Mapping[str, Callable[..., Any]]
    # Returns None when usable for (op, device, dtype), else a human-readable reason.
    unavailable: Callable[[str, torch.device, torch.dtype], str | None]
    dtensor_capable: bool
