"""Leadership terms: who leads, with which epoch, and the checks every write goes through.

A term is recorded in ``myolo.state.coordinator`` (key ``term``) before the new leader acts; compaction keeps
the last one, which is all a new leader needs to pick a larger epoch. Every coordinator follows that topic,
so a standby knows where to redirect writes, and a leader that sees a newer term of someone else steps down.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import structlog

from myolo.coordinator.core.errors import NotLeader

STATE_COORDINATOR = "myolo.state.coordinator"  # the compacted topic these records are written to

TERM_KEY = "term"
log = structlog.get_logger("myolo.coordinator.leadership")


class LeaderTerm(msgspec.Struct, kw_only=True):
    """One leadership term: its epoch (strictly increasing), who leads, where its API is."""

    epoch: int
    instance_id: str
    api_url: str = ""
    started: float
    generation: int = -1  # the Kafka group generation it was granted in


@dataclass(frozen=True)
class LeaderInfo:
    instance_id: str
    epoch: int
    api_url: str
    is_self: bool


def next_epoch(last: LeaderTerm | None, generation: int) -> int:
    """Greater than every epoch recorded so far, and at least the Kafka group generation that granted the
    term (generations only grow while the group exists; the recorded epoch covers a group that was deleted)."""
    return max(generation, (last.epoch if last is not None else 0) + 1, 1)


class Leadership:
    """This coordinator's term while it leads (``term``), and the latest term recorded by anyone."""

    def __init__(self, instance_id: str) -> None:
        self.instance_id = instance_id
        self.term: LeaderTerm | None = None
        self.last_term: LeaderTerm | None = None

    @property
    def epoch(self) -> int | None:
        return self.term.epoch if self.term is not None else None

    @property
    def is_leader(self) -> bool:
        return self.term is not None

    def require(self) -> int:
        """The current epoch, or :class:`NotLeader` pointing at the leader we know of."""
        if self.term is not None:
            return self.term.epoch
        other = self.last_term if self.last_term and self.last_term.instance_id != self.instance_id else None
        raise NotLeader(other.api_url if other else None, other.instance_id if other else None)

    def info(self) -> LeaderInfo | None:
        """The current leader as far as we know (ourselves, or the last term recorded)."""
        t = self.term or self.last_term
        if t is None:
            return None
        return LeaderInfo(t.instance_id, t.epoch, t.api_url, is_self=self.term is not None)

    def begin(self, term: LeaderTerm) -> None:
        self.term = self.last_term = term

    def end(self) -> bool:
        """Stop leading; True when we were leading."""
        was, self.term = self.term, None
        if was is not None:
            log.info("no longer leading", epoch=was.epoch)
        return was is not None

    def recorded(self, record: LeaderTerm) -> bool:
        """A term read from the state topic. True when it deposes us (a newer term of another coordinator)."""
        if self.last_term is None or record.epoch >= self.last_term.epoch:
            self.last_term = record
        if self.term is not None and record.epoch > self.term.epoch and record.instance_id != self.instance_id:
            log.error(
                "a newer term was recorded by another coordinator: stepping down",
                ours=self.term.epoch,
                theirs=record.epoch,
                leader=record.instance_id,
            )
            return True
        return False
