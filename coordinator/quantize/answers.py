"""What ``GET /v1/quantizations`` answers, and what ``myoloctl registry quantizations`` reads."""

from __future__ import annotations

import msgspec

from myolo.coordinator.quantize.records import QuantizeRun


class RunList(msgspec.Struct, kw_only=True):
    items: list[QuantizeRun]
