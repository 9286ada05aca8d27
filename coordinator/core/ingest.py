"""Does this coordinator hear the bus? The facts components need to tell "a node is silent" from "I hear nobody".

Measured on the wall clock, because they are about the real Kafka client (whatever clock the components run
on): how long since the broker last answered a fetch, and how far behind the newest events ingest is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from myolo.events.bus import EventConsumer


@dataclass(frozen=True)
class IngestState:
    assigned: bool  # the consumer holds partitions (False while it joins its group, e.g. after a broker restart)
    answer_age_s: float | None  # since the broker last answered a fetch (None: never yet)
    lag_s: float  # how old the oldest unprocessed event is, roughly (0 when caught up)

    def trouble(self, silent_after_s: float, lag_after_s: float) -> str | None:
        """Why the coordinator cannot trust its own hearing right now, or None when it can."""
        if not self.assigned:
            return "ingest holds no partitions (joining its consumer group)"
        if self.answer_age_s is None or self.answer_age_s > silent_after_s:
            age = "never" if self.answer_age_s is None else f"for {self.answer_age_s:.1f} s"
            return f"no answer from Kafka {age}"
        if self.lag_s > lag_after_s:
            return f"ingest is {self.lag_s:.1f} s behind the newest events"
        return None


class IngestHealth(Protocol):
    def state(self) -> IngestState: ...


class ConsumerHealth:
    """:class:`IngestHealth` of the coordinator's ingest consumer (bound once the consumer exists)."""

    def __init__(self, wall: Callable[[], float] = time.time) -> None:
        self.consumer: EventConsumer | None = None
        self._wall = wall

    def state(self) -> IngestState:
        if self.consumer is None:
            return IngestState(assigned=False, answer_age_s=None, lag_s=0.0)
        fetch = self.consumer.fetch_state()
        now = self._wall()
        age = None if fetch.last_answer is None else max(0.0, now - fetch.last_answer)
        lag = 0.0 if fetch.behind_since is None else max(0.0, now - fetch.behind_since)
        return IngestState(assigned=fetch.assigned > 0, answer_age_s=age, lag_s=lag)
