"""What the drift routes answer beyond their records, and what ``myoloctl drift`` reads."""

from __future__ import annotations

from typing import Literal

import msgspec

from myolo.coordinator.drift.records import StatusRecord


class StatusList(msgspec.Struct, kw_only=True):
    """``GET /v1/drift``: the latest evaluation of every watched version, by model then version."""

    items: list[StatusRecord]


class RuleReset(msgspec.Struct, kw_only=True):
    """``DELETE /v1/drift/{model}/rule``: the model is judged by the default rule again."""

    model: str
    rule_source: Literal["default"] = "default"
