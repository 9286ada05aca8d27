"""Commands from the coordinator to agents, and their acknowledgements.

A command carries the leader's ``epoch``: an agent that has seen a newer epoch rejects it, which fences a
stale leader. ``command_id`` is stable across retries so an agent executes each command once."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from events.errors import InvalidEvent
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


# ---- the arguments of each action: one definition, checked by the coordinator before it sends and by the
# ---- agent before it accepts (a command that cannot run is rejected, never accepted and then failed)


class ActionArgs(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """Base of the per-action argument Structs: an unknown argument is an error naming it."""


class SetIntervalArgs(ActionArgs, kw_only=True):
    interval_s: Annotated[float, msgspec.Meta(ge=0.05, le=3600.0)]


class ReportSampleArgs(ActionArgs, kw_only=True):
    pass


class NcclProbeArgs(ActionArgs, kw_only=True):
    """``sizes`` None means the probe's default sweep."""

    world_size: Annotated[int, msgspec.Meta(ge=2, le=64)] = 2
    sizes: (
        Annotated[list[Annotated[int, msgspec.Meta(ge=1, le=8 << 30)]], msgspec.Meta(min_length=1, max_length=32)]
        | None
    ) = None
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    iters: Annotated[int, msgspec.Meta(ge=1, le=1000)] | None = None
    warmup: Annotated[int, msgspec.Meta(ge=0, le=100)] | None = None
    dtype: Literal["float32", "float16", "bfloat16"] | None = None
    timeout_s: Annotated[float, msgspec.Meta(ge=1.0, le=3600.0)] = 300.0


class DrainArgs(ActionArgs, kw_only=True):
    """``draining=false`` lifts a drain."""

    draining: bool = True
    reason: Annotated[str, msgspec.Meta(max_length=500)] | None = None


ACTION_ARGS: dict[str, type[ActionArgs]] = {
    "set_interval": SetIntervalArgs,
    "report_sample": ReportSampleArgs,
    "nccl_probe": NcclProbeArgs,
    "drain": DrainArgs,
}


def action_args(action: str, args: dict[str, Any]) -> ActionArgs:
    """Validate a command's arguments; :class:`InvalidEvent` names the field (``args.interval_s``) and why."""
    cls = ACTION_ARGS.get(action)
    if cls is None:
        raise InvalidEvent(f"{action!r} is not an action agents execute; use one of {', '.join(ACTION_ARGS)}", "action")
    try:
        return msgspec.convert(args, cls, strict=True)
    except msgspec.ValidationError as exc:
        msg, _, path = str(exc).partition(" - at `$")
        path = path.rstrip("`")
        if msg.startswith("Object contains unknown field `"):
            path = f".{msg.split('`')[1]}"
            msg = f"unknown argument for {action}; it takes {', '.join(cls.__struct_fields__) or 'none'}"
        elif msg.startswith("Object missing required field `"):
            path, msg = f".{msg.split('`')[1]}", "missing required argument"
        raise InvalidEvent(msg, f"args{path}") from None
