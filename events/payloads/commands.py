"""Commands from the coordinator to agents, and their acknowledgements.

A command carries the leader's ``epoch``: an agent that has seen a newer epoch rejects it, which fences a
stale leader. ``command_id`` is stable across retries so an agent executes each command once."""

from __future__ import annotations

from typing import Any, Literal

from events.payloads.common import Id, NonNegFloat, NonNegInt, Payload

CommandAction = Literal[
    "nccl_probe",
    "report_sample",
    "set_interval",
    "start_workers",
    "stop_workers",
    "checkpoint",
    "drain",
    "upgrade",
]


class Command(Payload, kw_only=True):
    """``ai.myolo.command.v1``: something a node must do. Signed; see ``events.signing``."""

    command_id: Id
    node_id: Id
    epoch: NonNegInt
    action: CommandAction
    args: dict[str, Any] = {}
    issued_by: str | None = None
    expires_at: NonNegFloat | None = None


class CommandAck(Payload, kw_only=True):
    """``ai.myolo.command.ack.v1``: what became of a command on the node."""

    command_id: Id
    node_id: Id
    epoch: NonNegInt
    status: Literal["accepted", "done", "rejected", "failed", "duplicate"]
    reason: str | None = None
    result: dict[str, Any] = {}
