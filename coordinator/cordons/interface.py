"""What other components may ask of the cordons component."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["AutoCordons"]


@runtime_checkable
class AutoCordons(Protocol):
    def cordon_automatically(self, node_id: str, reason: str, by: str) -> bool:
        """Queue an automatic cordon (``by`` like ``auto:job``), recorded before it applies and followed by a
        drain like the fault and Lost cordons. False when a decision for the node is already on its way."""

    async def uncordon_automatically(self, node_id: str, reason: str, by: str) -> bool:
        """Lift a cordon that ``by`` (an ``auto:`` author) set itself, and the drain that came with it; False
        (nothing written) when the node is not cordoned by ``by`` — a fault's or an operator's cordon stays."""
