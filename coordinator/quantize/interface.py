"""What other components may take from the quantize component: nothing to ask, only the refusals it raises.
Its routes take ``Quantizations`` (``api.py``)."""

from __future__ import annotations

from myolo.coordinator.core.errors import Invalid, NotFound


class QuantizeRefused(Invalid):
    """A request that cannot run: ``field`` names what to change."""


class UnknownRun(NotFound):
    def __init__(self, name: str) -> None:
        super().__init__(f"quantization {name!r} is not known", field="name", hint="GET /v1/quantizations lists them")
