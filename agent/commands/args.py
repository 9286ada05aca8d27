"""The boundary where the agent reads a command's arguments: the wire's mapping becomes the action's Struct.

Why here: a command that cannot run must be *rejected* (nothing happened, the coordinator may fix and resend
under a new id), never accepted and then failed. The checks themselves are the contract's
(``myolo.events.payloads.commands.action_args``: the coordinator runs the same ones before it sends); past this
point admissions and actions see only the checked Struct of their action (``SetIntervalArgs``, ...).
"""

from __future__ import annotations

from contextvars import ContextVar

from myolo.events.errors import InvalidEvent
from myolo.events.payloads import Command
from myolo.events.payloads.commands import ActionArgs, action_args

_COMMAND_ID: ContextVar[str] = ContextVar("myolo_command_id")


class ArgsError(InvalidEvent):
    """A command argument that is missing or wrong. ``field`` is e.g. ``args.interval_s``."""


def command_args(cmd: Command) -> ActionArgs:
    """``cmd.args`` decoded into its action's Struct; :class:`ArgsError` names the field and why."""
    try:
        return action_args(cmd.action, cmd.args)
    except InvalidEvent as exc:
        raise ArgsError(exc.reason, exc.field) from None


def current_command_id() -> str:
    """The id of the command whose action runs in this task, for an action that reports under it (the
    bandwidth probe tags its report). Set by the executor around each action; ``LookupError`` outside one."""
    return _COMMAND_ID.get()


def running_command(command_id: str) -> None:
    """Mark the current task as running ``command_id`` (the executor, once per action task)."""
    _COMMAND_ID.set(command_id)
