"""What the commands component answers of its records: to other components (:class:`SentCommand`) and to
``GET /v1/commands`` (the remembered commands, each with what became of it)."""

from __future__ import annotations

import msgspec

from myolo.coordinator.commands.interface import SentCommand
from myolo.coordinator.commands.records import CommandIntent
from myolo.events.errors import InvalidEvent
from myolo.events.payloads.commands import action_args


class IntentList(msgspec.Struct, kw_only=True):
    items: list[CommandIntent]


def sent_command(intent: CommandIntent) -> SentCommand:
    """The answer of one record: its arguments read as their action's Struct (None when they no longer read,
    so a remembered command of another version still answers)."""
    try:
        args = action_args(intent.action, intent.args)
    except (InvalidEvent, ValueError):
        args = None
    return SentCommand(
        command_id=intent.command_id,
        node_id=intent.node_id,
        action=intent.action,
        args=args,
        status=intent.status,
        reason=intent.reason,
        result=intent.result,
        original=intent.original,
    )
