"""What the coordinator writes to its compacted state topics, besides ``CordonRecord`` (fleet/model.py).

Every record travels with a ``myolo-state-kind`` header naming its Struct, so one topic may hold several
kinds and a reader never guesses. ``myolo.state.commands`` holds command intents (keyed by command id) and
the leadership terms (key ``TERM_KEY``: compaction keeps the last one, which is all a new leader needs).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from coordinator.fleet.model import CordonRecord

TERM_KEY = "_leader-term"  # never a command id: those are hex

CommandStatus = Literal["pending", "accepted", "done", "rejected", "failed", "duplicate", "expired"]
TERMINAL: frozenset[str] = frozenset({"done", "rejected", "failed", "duplicate", "expired"})


class CommandIntent(msgspec.Struct, kw_only=True):
    """A command the leader decided to send, and what became of it. Written before the command is sent, and
    again on every change, so a new leader resumes exactly the unfinished ones with the same ids."""

    command_id: str
    node_id: str
    action: str
    args: dict[str, Any] = {}
    epoch: int  # the term that last sent it
    status: CommandStatus = "pending"
    attempts: int = 0
    created: float
    last_sent: float | None = None
    finished: float | None = None
    reason: str | None = None
    result: dict[str, Any] = {}
    issued_by: str = ""

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


class LeaderTerm(msgspec.Struct, kw_only=True):
    """One leadership term: its epoch (strictly increasing), who leads, where its API is."""

    epoch: int
    instance_id: str
    api_url: str = ""
    started: float
    generation: int = -1  # the Kafka group generation it was granted in


KINDS: dict[str, type[msgspec.Struct]] = {"cordon": CordonRecord, "command": CommandIntent, "term": LeaderTerm}
KIND_OF: dict[type[msgspec.Struct], str] = {v: k for k, v in KINDS.items()}
