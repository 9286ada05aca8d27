"""What the commands component writes to ``myolo.state.commands`` (keyed by command id)."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

CommandStatus = Literal["pending", "accepted", "done", "rejected", "failed", "duplicate", "expired"]
TERMINAL: frozenset[str] = frozenset({"done", "rejected", "failed", "duplicate", "expired"})


class CommandIntent(msgspec.Struct, kw_only=True, frozen=True):
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


STATE_COMMANDS = "myolo.state.commands"  # the compacted topic they are written to
