"""A cell's side: the federation's intents for this cell, applied in partition order behind the fence."""

from __future__ import annotations

import msgspec

from myolo.coordinator.federation.fencing import EpochFence
from myolo.coordinator.federation.records import CellIntent, FederationTerm, Intent

FEDERATION = "federation"  # the one writer of intents, whoever leads it


class CellInbox:
    """Decodes and fences intents for ``cell``; ``applied`` is what the cell acts on, in order."""

    def __init__(self, cell: str) -> None:
        self.cell = cell
        self.fence = EpochFence()
        self.applied: list[Intent] = []
        self.refused: list[str] = []  # why each refused record was refused

    def receive(self, value: bytes) -> str | None:
        """Apply one record of the intents topic; None when applied, otherwise why not."""
        try:
            record = msgspec.json.decode(value, type=CellIntent)
        except msgspec.DecodeError as exc:
            return self._refuse(f"intent: {exc}")
        if record.cell != self.cell:
            return self._refuse(f"cell: {record.cell!r} is not this cell ({self.cell!r})")
        reason = self.fence.admit(FEDERATION, record.intent.epoch)
        if reason is not None:
            return self._refuse(reason)
        if not isinstance(record.intent, FederationTerm):  # a term only moves the fence
            self.applied.append(record.intent)
        return None

    def _refuse(self, reason: str) -> str:
        self.refused.append(reason)
        return reason
