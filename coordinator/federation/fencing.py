"""Epoch fencing of records from a role that fails over: a leader's word counts until a newer leader spoke.

Kafka keeps one key's records in order on one partition. A new leader writes a record with its epoch
before anything else (the federation a :class:`FederationTerm` per cell, a cell leader its first summary);
a reader that has seen epoch ``e`` from a writer refuses that writer's later records of an epoch below
``e``. A deposed leader that has not noticed yet can still write, but what it writes after its successor's
first record is refused by every reader, in the same order on every reader.
"""

from __future__ import annotations


class EpochFence:
    """The newest epoch seen from each writer (a cell, or the federation), and the refusals, counted."""

    def __init__(self) -> None:
        self.newest: dict[str, int] = {}
        self.refused = 0

    def admit(self, writer: str, epoch: int) -> str | None:
        """None when a record of ``epoch`` from ``writer`` may be applied (and remember its epoch); otherwise
        why not."""
        newest = self.newest.get(writer, -1)
        if epoch < newest:
            self.refused += 1
            return f"epoch: {epoch} from {writer!r} is older than its epoch {newest} already seen (a deposed leader)"
        self.newest[writer] = epoch
        return None
