"""Small helpers shared by the registry and backends."""

from __future__ import annotations

from typing import Any

import torch

try:
    from torch.distributed.tensor import DTensor as _DTensor
except ImportError:  # torch built without distributed: nothing can be a DTensor
    _DTensor = None


def is_dtensor(t: Any) -> bool:
    return _DTensor is not None and isinstance(t, _DTensor)


def first_tensor(params: Any) -> torch.Tensor | None:
    """The first tensor of an optimizer's params argument (tensors or param-group dicts)."""
    for item in params:
        if isinstance(item, dict):
            found = first_tensor(item.get("params", []))
            if found is not None:
                return found
        elif isinstance(item, torch.Tensor):
            return item
    return None
