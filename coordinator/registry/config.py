"""The ``[registry]`` section: how much the registry holds (every coordinator keeps all of it in memory)."""

from __future__ import annotations

from typing import Annotated

import msgspec


class RegistryConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Bounds on what the registry accepts, so a runaway retraining loop or a script cannot grow every
    coordinator's memory without end: past one, a write is refused naming the bound (``registry.max_models``).
    Each alias keeps its newest 500 history entries (``records.HISTORY_MAX``)."""

    max_models: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 1000
    max_versions_per_model: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 10_000
    max_aliases_per_model: Annotated[int, msgspec.Meta(ge=0, le=1000)] = 32  # besides champion and challenger
