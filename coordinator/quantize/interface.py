"""What the HTTP routes (and the CLI through them) may ask of the quantize component: ``Quantizations``."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from myolo.coordinator.core.errors import Invalid, NotFound
from myolo.coordinator.quantize.records import QuantizeRequest, QuantizeRun


@runtime_checkable
class Quantizations(Protocol):
    def runs(self) -> tuple[QuantizeRun, ...]:
        """Every run kept, newest first."""

    def run(self, name: str) -> QuantizeRun | None: ...

    async def quantize(self, model: str, version: int, request: QuantizeRequest, by: str) -> tuple[QuantizeRun, bool]:
        """Record the run, then submit its job; (run, created). The same request for the same version again is
        the same run (not a second job). Raises ``NotLeader``, ``QuantizeRefused`` naming the field, and the
        registry's ``UnknownModel`` / ``UnknownVersion``."""


class QuantizeRefused(Invalid):
    """A request that cannot run: ``field`` names what to change."""


class UnknownRun(NotFound):
    def __init__(self, name: str) -> None:
        super().__init__(f"quantization {name!r} is not known", field="name", hint="GET /v1/quantizations lists them")
