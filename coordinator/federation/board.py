"""The federation's side: each cell's newest summary from its current leader, and fleet-wide totals."""

from __future__ import annotations

import msgspec

from myolo.coordinator.federation.fencing import EpochFence
from myolo.coordinator.federation.records import CellSummary


class SummaryBoard:
    """Decodes and fences cell summaries; ``by_cell`` holds the newest admitted one per cell."""

    def __init__(self) -> None:
        self.fence = EpochFence()
        self.by_cell: dict[str, CellSummary] = {}
        self.refused: list[str] = []

    def receive(self, value: bytes) -> str | None:
        """Take one record of the summaries topic; None when admitted, otherwise why not."""
        try:
            summary = msgspec.json.decode(value, type=CellSummary)
        except msgspec.DecodeError as exc:
            self.refused.append(f"summary: {exc}")
            return self.refused[-1]
        reason = self.fence.admit(summary.cell, summary.epoch)
        if reason is not None:
            self.refused.append(reason)
            return reason
        self.by_cell[summary.cell] = summary
        return None

    def schedulable_gpus(self, gpu_class: str) -> dict[str, int]:
        """Where GPUs of ``gpu_class`` are free to place a job, by cell (the federation's job queue asks)."""
        return {
            cell: sum(c.gpus_schedulable for c in s.classes if c.gpu == gpu_class) for cell, s in self.by_cell.items()
        }
