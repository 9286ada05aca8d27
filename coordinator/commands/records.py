"""What the commands component writes to ``myolo.state.commands`` (keyed by command id)."""

from __future__ import annotations

from typing import Any

import msgspec

from myolo.events.payloads.commands import TERMINAL, CommandStatus, Outcome, outcome


class CommandIntent(msgspec.Struct, kw_only=True, frozen=True):
    """A command the leader decided to send, and what became of it. Written before the command is sent, and
    again on every change, so a new leader resumes exactly the unfinished ones with the same ids.

    Judge it by :attr:`outcome` (``done``/``failed``/None), never by ``status`` alone: a ``duplicate`` is
    done or failed as its ``original`` run was."""

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
    original: Outcome | None = None  # a duplicate's first outcome, as the agent reported it
    issued_by: str = ""

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def outcome(self) -> Outcome | None:
        return outcome(self.status, self.original)


STATE_COMMANDS = "myolo.state.commands"  # the compacted topic they are written to
