"""What the quantize component's own HTTP routes (and the CLI through them) ask of it: its runs as records, and a
new run. No other component asks the quantize component anything."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

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
