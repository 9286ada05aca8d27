"""Package attributes imported on first use, so a package can name torch-backed classes without importing torch.

What needs it: the torch-free checks (``myolo.kernels.train.config``, ``python -m myolo.kernels.cli.check_job``) import
``myolo.kernels.model`` and ``myolo.kernels.parallel`` for plain data (presets, layouts), while the same packages also
export the torch modules (``GPT``, ``MeshInfo``) that training imports by the package name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_attributes(package: str, where: dict[str, str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package``: ``where`` maps each lazy name to the module defining it."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
