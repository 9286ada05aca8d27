"""What other components may ask of the commands component."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from myolo.coordinator.commands.records import CommandIntent
from myolo.events.payloads.commands import ActionArgs

__all__ = ["CommandIntent", "CommandSender"]


@runtime_checkable
class CommandSender(Protocol):
    async def issue(self, node_id: str, args: ActionArgs) -> CommandIntent:
        """Record the intent, then send the signed command of ``args.action`` (the action is named by the
        arguments' type: ``issue(node, DrainArgs(reason=...))``). Raises ``NotLeader`` when not leading and
        ``ValueError`` (naming the argument) when the agent could not execute it."""

    def intent(self, command_id: str) -> CommandIntent | None:
        """A command and what became of it (its status follows the acks; None once forgotten, an hour after
        it finished)."""

    def has_pending(self, node_id: str, action: str) -> bool:
        """Is such a command already on its way (so a reaction does not pile up copies of it)?"""
