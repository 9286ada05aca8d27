"""Commands from the coordinator to agents, and their acknowledgements.

A command carries the leader's ``epoch``: an agent that has seen a newer epoch rejects it, which fences a
stale leader. ``command_id`` is stable across retries so an agent executes each command once.

What a command may ask is :data:`ACTIONS`: one args Struct per action (``command_args``), each naming its
result type (``command_results``); the rest of this module is derived from it. Both are re-exported here."""

from __future__ import annotations

import typing
from typing import Any, Literal, get_args

import msgspec

from myolo.common.errors import validation_problem
from myolo.events.errors import InvalidEvent
from myolo.events.payloads.command_args import (
    MAX_PROFILE_S,
    ActionArgs,
    CheckTfrecordsArgs,
    DrainArgs,
    GpuIndex,
    HashFilesArgs,
    NcclProbeArgs,
    ProfileArgs,
    ProfileId,
    RdmaLatencyArgs,
    ReportSampleArgs,
    RollbackArgs,
    RuntimeVersionsArgs,
    SetIntervalArgs,
    StartWorkersArgs,
    StopWorkersArgs,
    UpgradeArgs,
    Version,
)
from myolo.events.payloads.command_results import (
    ActionResult,
    CheckTfrecordsResult,
    Component,
    DrainResult,
    FileDigest,
    HashFilesResult,
    NcclProbeResult,
    ProfileResult,
    RdmaLatencyResult,
    ReportSampleResult,
    RollbackResult,
    RuntimeVersions,
    SetIntervalResult,
    StartWorkersResult,
    StopWorkersResult,
    TfRecordFile,
    TfRecordPattern,
    TfRecordProblem,
    UpgradeResult,
)
from myolo.events.payloads.common import Id, NonNegFloat, NonNegInt, Payload
from myolo.events.payloads.external import Sha256

ACTIONS: tuple[type[ActionArgs], ...] = (
    SetIntervalArgs,
    ReportSampleArgs,
    NcclProbeArgs,
    DrainArgs,
    StartWorkersArgs,
    StopWorkersArgs,
    UpgradeArgs,
    RollbackArgs,
    HashFilesArgs,
    CheckTfrecordsArgs,
    RuntimeVersionsArgs,
    RdmaLatencyArgs,
    ProfileArgs,
)
"""Every action agents execute, each declared once by its arguments' Struct: its name (``action``), its
arguments (the fields), what it answers (``result``) and what it does (the docstring). The action names, the
decoding of a command's arguments and of an ack's result are all derived from this tuple; the agent's dispatch
table and the coordinator's senders are checked against it by tests."""

ACTION_ARGS: dict[str, type[ActionArgs]] = {cls.action: cls for cls in ACTIONS}
ACTION_RESULTS: dict[str, Any] = {cls.action: cls.result for cls in ACTIONS}
ACTION_NAMES: tuple[str, ...] = tuple(ACTION_ARGS)
CommandAction = Literal[ACTION_NAMES]  # the names above: an unknown action fails decoding at `data.action`


class Command(Payload, kw_only=True):
    """``ai.myolo.command.v1``: something a node must do. Signed; see ``myolo.events.signing``."""

    command_id: Id
    node_id: Id
    epoch: NonNegInt
    action: CommandAction
    args: dict[str, Any] = {}  # as it travels; read only through :func:`action_args`, at the boundary
    issued_by: str | None = None
    expires_at: NonNegFloat | None = None


# ---- what becomes of a command: the one definition of its statuses, for agent and coordinator alike

AckStatus = Literal["accepted", "done", "rejected", "failed", "duplicate"]
"""What an agent says of a command: taken (``accepted``), ran (``done``/``failed``), refused without running
(``rejected``), or a retry of an id that already ran (``duplicate``, with the original outcome beside it)."""
Outcome = Literal["done", "failed"]
"""What a command came to, in the end: judged by :func:`outcome`, never by the status alone."""
CommandStatus = Literal["pending", AckStatus, "expired"]
"""A command as the coordinator records it: ``pending`` until an agent answers, ``expired`` when none did."""
TERMINAL: frozenset[str] = frozenset({"done", "rejected", "failed", "duplicate", "expired"})
ACK_STATUSES: tuple[str, ...] = get_args(AckStatus)


def outcome(status: str, original: Outcome | None = None) -> Outcome | None:
    """What a command came to: ``done``, ``failed`` (rejected, failed, expired, or a duplicate of a failed
    run) or None while it is still on its way. A ``duplicate`` is judged by the ``original`` outcome it
    carries; one that carries none (an agent that does not say) counts as failed, since nothing shows it ran."""
    if status == "done":
        return "done"
    if status == "duplicate":
        return original or "failed"
    if status in TERMINAL:
        return "failed"
    return None


class CommandAck(Payload, kw_only=True):
    """``ai.myolo.command.ack.v1``: what became of a command on the node. A ``duplicate`` ack carries the
    first run's outcome in ``original`` and its result in ``result``."""

    command_id: Id
    node_id: Id
    epoch: NonNegInt
    status: AckStatus
    reason: str | None = None
    result: dict[str, Any] = {}
    original: Outcome | None = None

    @property
    def outcome(self) -> Outcome | None:
        return outcome(self.status, self.original)


def action_result(action: str, result: dict[str, Any]) -> Any:
    """An ack's ``result`` read as its action's result type (``ACTION_RESULTS``); ``InvalidEvent`` names the
    field when it does not read."""
    tp = ACTION_RESULTS.get(action)
    if tp is None:
        raise InvalidEvent(
            f"{action!r} is not an action agents execute; use one of {', '.join(ACTION_RESULTS)}", "action"
        )
    try:
        return msgspec.convert(result, tp)
    except msgspec.ValidationError as exc:
        problem = validation_problem(exc)
        raise InvalidEvent(problem.message, f"result{problem.field}") from None


def action_args(action: str, args: dict[str, Any]) -> ActionArgs:
    """Validate a command's arguments; :class:`InvalidEvent` names the field (``args.interval_s``) and why."""
    cls = ACTION_ARGS.get(action)
    if cls is None:
        raise InvalidEvent(f"{action!r} is not an action agents execute; use one of {', '.join(ACTION_ARGS)}", "action")
    try:
        checked = msgspec.convert(args, cls, strict=True)
    except msgspec.ValidationError as exc:
        problem = validation_problem(exc)
        msg, path, nested = problem.message, problem.field, problem.parent
        if problem.kind == "unknown":
            takes = _fields_at(cls, nested)
            msg = f"unknown {'field' if nested else 'argument'} for {action}; {'it' if not nested else nested[1:]} takes {takes}"
        elif problem.kind == "missing":
            msg = "missing required argument"
        elif msg.startswith("Invalid enum value") and (choices := _choices_at(cls, path)):
            msg = f"{msg}; choose one of {choices}"
        raise InvalidEvent(msg, f"args{path}") from None
    checked.check()
    return checked


def _type_at(cls: type[msgspec.Struct], path: str) -> Any:
    """The declared type of the field at ``path`` (``.job.schedule``) under ``cls``; None if not found."""
    tp: Any = cls
    for name in [p.split("[")[0] for p in path.split(".") if p]:
        if not (isinstance(tp, type) and issubclass(tp, msgspec.Struct)):
            return None
        field = next((f for f in msgspec.structs.fields(tp) if f.name == name), None)
        if field is None:
            return None
        tp = field.type
    return tp


def _fields_at(cls: type[msgspec.Struct], path: str) -> str:
    """The fields of the Struct at ``path`` under ``cls``, for an "unknown field" message."""
    tp = _type_at(cls, path)
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return ", ".join(tp.__struct_fields__) or "none"
    return "other fields"


def _choices_at(cls: type[msgspec.Struct], path: str) -> str | None:
    """``a, b`` when the field at ``path`` is a Literal, for an "invalid enum value" message."""
    tp = _type_at(cls, path)
    for arg in (tp, *typing.get_args(tp)):
        if typing.get_origin(arg) is Literal:
            return ", ".join(map(str, typing.get_args(arg)))
    return None


__all__ = [
    "ACK_STATUSES",
    "ACTIONS",
    "ACTION_ARGS",
    "ACTION_NAMES",
    "ACTION_RESULTS",
    "MAX_PROFILE_S",
    "TERMINAL",
    "AckStatus",
    "ActionArgs",
    "ActionResult",
    "CheckTfrecordsArgs",
    "CheckTfrecordsResult",
    "Command",
    "CommandAck",
    "CommandAction",
    "CommandStatus",
    "Component",
    "DrainArgs",
    "DrainResult",
    "FileDigest",
    "GpuIndex",
    "HashFilesArgs",
    "HashFilesResult",
    "InvalidEvent",
    "NcclProbeArgs",
    "NcclProbeResult",
    "Outcome",
    "ProfileArgs",
    "ProfileId",
    "ProfileResult",
    "RdmaLatencyArgs",
    "RdmaLatencyResult",
    "ReportSampleArgs",
    "ReportSampleResult",
    "RollbackArgs",
    "RollbackResult",
    "RuntimeVersions",
    "RuntimeVersionsArgs",
    "SetIntervalArgs",
    "SetIntervalResult",
    "Sha256",
    "StartWorkersArgs",
    "StartWorkersResult",
    "StopWorkersArgs",
    "StopWorkersResult",
    "TfRecordFile",
    "TfRecordPattern",
    "TfRecordProblem",
    "UpgradeArgs",
    "UpgradeResult",
    "Version",
    "action_args",
    "action_result",
    "outcome",
]
