"""What other components may ask of the commands component, and the answer it gives of a command."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import msgspec

from myolo.events.errors import InvalidEvent
from myolo.events.payloads.commands import (
    TERMINAL,
    ActionArgs,
    ActionResult,
    CommandStatus,
    HashFilesResult,
    Outcome,
    action_result,
    outcome,
)

__all__ = ["CommandSender", "SentCommand"]


class SentCommand(msgspec.Struct, kw_only=True, frozen=True):
    """A command sent to a node's agent, and what became of it so far: what callers read of the commands
    component's record, not the record itself.

    Judge it by :attr:`outcome` (``done``/``failed``/None), never by ``status`` alone: a ``duplicate`` is
    done or failed as its ``original`` run was."""

    command_id: str
    node_id: str
    action: str
    args: ActionArgs | None = None  # None only for a remembered command whose arguments no longer read
    status: CommandStatus = "pending"
    reason: str | None = None
    result: dict[str, Any] = {}  # the agent's answer as it came: each caller reads it as its action's type
    original: Outcome | None = None  # a duplicate's first outcome, as the agent reported it

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def outcome(self) -> Outcome | None:
        return outcome(self.status, self.original)

    def typed_result(self) -> ActionResult | HashFilesResult | None:
        """The agent's result read as its action's result type; None when it has none or it does not read."""
        if not self.result:
            return None
        try:
            return action_result(self.action, self.result)
        except InvalidEvent:
            return None


@runtime_checkable
class CommandSender(Protocol):
    async def issue(self, node_id: str, args: ActionArgs) -> SentCommand:
        """Record the intent, then send the signed command of ``args.action`` (the action is named by the
        arguments' type: ``issue(node, DrainArgs(reason=...))``). Raises ``NotLeader`` when not leading and
        ``ValueError`` (naming the argument) when the agent could not execute it."""

    def intent(self, command_id: str) -> SentCommand | None:
        """A command and what became of it (its status follows the acks; None once forgotten, an hour after
        it finished)."""

    def has_pending(self, node_id: str, action: str) -> bool:
        """Is such a command already on its way (so a reaction does not pile up copies of it)?"""
