"""The ``[drift]`` section: the default rule (``[drift.rule]``), how many models and versions are watched,
and whether a drift submits the model's retraining job."""

from __future__ import annotations

from typing import Annotated

import msgspec

from myolo.coordinator.drift.rule import DriftRule


class DriftConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A model's own rule (``myoloctl drift rule set``) replaces ``rule`` for that model. Samples of a model or
    version beyond ``max_models`` / ``max_versions`` are counted and dropped (named in the log), so a producer
    sending endless model names cannot exhaust the coordinator's memory. ``retrain = false``: detect and
    publish only (no job is submitted)."""

    rule: DriftRule = msgspec.field(default_factory=DriftRule)
    max_models: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 1000
    max_versions: Annotated[int, msgspec.Meta(ge=1, le=64)] = 4  # versions watched per model at once
    retrain: bool = True
