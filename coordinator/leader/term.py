"""Epochs: one per leadership term, strictly increasing across every coordinator that ever led."""

from __future__ import annotations

from coordinator.state.records import LeaderTerm


def next_epoch(last: LeaderTerm | None, generation: int) -> int:
    """Greater than every epoch recorded so far, and at least the Kafka group generation that granted the
    term (generations only grow while the group exists; the recorded epoch covers a group that was deleted)."""
    return max(generation, (last.epoch if last is not None else 0) + 1, 1)
