"""The agent side of coordinator commands: fence stale leaders, take each command id once, acknowledge.

Order of checks for a command (its signature was already verified by the consumer, see ``consumer.py``):

1. not for this node -> skipped silently (the commands topic is keyed by node id, so partitions are shared);
2. epoch older than the highest seen -> ``rejected`` (a stale leader is fenced); a newer epoch is persisted
   before anything else happens under it;
3. id already taken -> ``duplicate`` with the original outcome (``accepted`` again while it still runs), never
   a second run;
4. expired, too old, an action this agent does not run, bad arguments (``args`` is decoded here into the
   action's Struct, the only form actions see), or refused by the action's admission check (the node's own
   judgement: a GPU it does not have, a job the trainer refuses) -> ``rejected`` naming why and, in the ack's
   ``result.field``, the argument (nothing ran; not remembered, so a retry is judged again). An action outside
   the contract never gets here: the command fails decoding at ``data.action`` and is dead-lettered;
5. otherwise the id is recorded as taken (durably), then the action runs in a task of its own and the agent
   acks ``accepted``, then ``done`` (with the action's result) or ``failed`` (with the reason).

Actions run off the consumer's loop because a bandwidth probe may take minutes: the consumer must keep
polling (and taking other commands) meanwhile. Commands of the same action run one at a time, in order.
Ack sends never raise: a lost ack is repaired by the coordinator's retry, which gets a ``duplicate`` ack.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import msgspec
import structlog

from myolo.agent.commands.args import ArgsError, command_args, running_command
from myolo.agent.commands.ledger import DEFAULT_MAX_IDS, Entry, Ledger
from myolo.agent.tasks import TaskSet
from myolo.common.clock import Clock, SystemClock
from myolo.events.deadletter import RecordInfo
from myolo.events.envelope import Event, parse_rfc3339
from myolo.events.errors import InvalidEvent
from myolo.events.payloads import Command, CommandAck, Payload
from myolo.events.payloads.commands import ACTION_ARGS, AckStatus, ActionArgs, Outcome
from myolo.events.signing import Verifier

log = structlog.get_logger("myolo.agent.commands")
ActionFn = Callable[[Any], Awaitable[Mapping[str, Any] | msgspec.Struct | None]]  # called with its args Struct
AdmitFn = Callable[[Any], Awaitable[None]]  # called with the same Struct first; raises ArgsError to refuse
DEFAULT_MAX_AGE_S = 3600.0
STOPPED = "cancelled: the agent stopped while the command ran; it was not run again"


class AckSender(Protocol):
    """Where acks go: an :class:`myolo.events.bus.EventProducer`, or :class:`myolo.agent.commands.SpooledAcks`."""

    async def send(self, payload: Payload) -> object: ...


@dataclass
class ExecutorStats:
    accepted: int = 0
    done: int = 0
    failed: int = 0
    rejected: int = 0
    duplicates: int = 0
    unverified: int = 0
    other_nodes: int = 0
    ack_errors: int = 0


class CommandExecutor:
    """Execute this node's commands once each. ``handle`` is the :class:`myolo.events.bus.EventConsumer` handler.

    ``actions`` maps action names (those of ``myolo.events.payloads.commands.ACTIONS``) to the daemon's async
    callables, each called with its action's checked args Struct (``set_interval(SetIntervalArgs)``) and
    returning its result Struct or a JSON-able mapping (the ack's ``result``). An action of the contract the
    table lacks is rejected as unsupported by this agent. ``admissions`` maps actions to async checks called with
    the same Struct before the command is taken (``start_workers``: the GPUs exist, the trainer accepts the job);
    one that raises ``ArgsError`` gets the command rejected, and holds the consumer meanwhile, so it must be
    bounded in time. ``state_dir`` holds the ledger.
    """

    def __init__(
        self,
        node_id: str,
        state_dir: str | Path,
        verifier: Verifier,
        producer: AckSender,
        actions: Mapping[str, ActionFn],
        clock: Clock | None = None,
        *,
        max_ids: int = DEFAULT_MAX_IDS,
        max_age_s: float | None = DEFAULT_MAX_AGE_S,
        admissions: Mapping[str, AdmitFn] | None = None,
    ) -> None:
        for table, names in (("actions", actions), ("admissions", admissions or {})):
            unknown = sorted(set(names) - set(ACTION_ARGS))
            if unknown:
                known = ", ".join(ACTION_ARGS)
                raise ValueError(f"{table}: {unknown[0]!r} is not an action of the contract; known actions: {known}")
        if max_age_s is not None and max_age_s <= 0:
            raise ValueError(f"max_age_s must be > 0 (or None to disable), got {max_age_s}")
        self.node_id = node_id
        self.verifier = verifier
        self.clock = clock or SystemClock()
        self.stats = ExecutorStats()
        self.ledger = Ledger.open(state_dir, max_ids=max_ids, now=self.clock.now())
        self._acks = producer
        self._actions = dict(actions)
        self._admissions = dict(admissions or {})
        self._max_age_s = max_age_s
        self._lanes: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._tasks = TaskSet(log, "command task")
        self._running: dict[str, asyncio.Task] = {}

    async def handle(self, event: Event, info: RecordInfo | None = None) -> None:
        """Judge one verified command event and act on it (see the module docstring for the order)."""
        cmd = event.data
        if not isinstance(cmd, Command) or cmd.node_id != self.node_id:
            self.stats.other_nodes += 1
            return
        seen = self.ledger.epoch
        if cmd.epoch < seen:
            reason = (
                f"stale epoch: command epoch {cmd.epoch} is older than epoch {seen} already seen; a newer "
                "coordinator leads, so this one is fenced"
            )
            await self._reject(cmd, reason, {"seen_epoch": seen})
            return
        self.ledger.raise_epoch(cmd.epoch)
        entry = self.ledger.get(cmd.command_id)
        if entry is not None:
            await self._duplicate(cmd, entry)
            return
        why = self._why_not(cmd, event)
        if why is not None:
            await self._reject(cmd, why)
            return
        try:
            args = command_args(cmd)
            admit = self._admissions.get(cmd.action)
            if admit is not None:
                await admit(args)
        except ArgsError as exc:
            await self._reject(cmd, f"bad arguments: {exc}; fix it and send a new command", {"field": exc.field})
            return
        self.ledger.begin(cmd.command_id, cmd.action, cmd.epoch, self.clock.now())
        self.stats.accepted += 1
        task = asyncio.create_task(self._run(cmd, self._actions[cmd.action], args), name=f"cmd:{cmd.command_id}")
        self._running[cmd.command_id] = task
        self._tasks.add(task)

    def reject_unverified(self, event: Event, error: InvalidEvent) -> None:
        """A command that failed its signature check (it is dead-lettered too): ack ``rejected`` when it
        claims to be for this node, so the coordinator learns why nothing happens. Its epoch is ignored."""
        cmd = event.data
        if not isinstance(cmd, Command) or cmd.node_id != self.node_id:
            return
        self.stats.unverified += 1
        self._tasks.add(asyncio.ensure_future(self._reject(cmd, f"signature rejected: {error.reason}")))

    @property
    def running(self) -> list[str]:
        """Ids of the commands whose action is running now (for the agent's status report)."""
        return list(self._running)

    async def drain(self) -> None:
        """Wait until every running action and pending ack is finished (tests; a graceful stop)."""
        await self._tasks.drain()

    async def close(self) -> None:
        """Cancel running actions (recorded as failed, never re-run) and close the ledger."""
        await self._tasks.cancel()
        self.ledger.close()

    def _why_not(self, cmd: Command, event: Event) -> str | None:
        now = self.clock.now()
        if cmd.expires_at is not None and cmd.expires_at < now:
            return f"expired: expires_at {cmd.expires_at:.3f} is {now - cmd.expires_at:.1f} s in the past"
        if self._max_age_s is not None and event.time is not None:
            age = now - parse_rfc3339(event.time).timestamp()
            if age > self._max_age_s:
                return f"too old: issued {age:.0f} s ago, over this agent's max_age_s of {self._max_age_s:g} s"
        if cmd.action not in self._actions:
            supported = ", ".join(sorted(self._actions)) or "none"
            return f"action {cmd.action!r} is not supported by this agent (supported: {supported})"
        return None

    async def _run(self, cmd: Command, fn: ActionFn, args: ActionArgs) -> None:
        running_command(cmd.command_id)  # this task's own context: the action may ask for its command's id
        await self._ack(cmd, "accepted")
        try:
            async with self._lanes[cmd.action]:
                status: Outcome = "done"
                reason: str | None = None
                try:
                    result = _as_result(await fn(args))
                except asyncio.CancelledError:
                    self.ledger.finish(cmd.command_id, "failed", STOPPED, {}, self.clock.now())
                    self.stats.failed += 1
                    raise
                except Exception as exc:
                    status, reason, result = "failed", f"{type(exc).__name__}: {exc}", {}
                    log.warning("command failed", command_id=cmd.command_id, action=cmd.action, reason=reason)
        finally:
            self._running.pop(cmd.command_id, None)
        self.ledger.finish(cmd.command_id, status, reason, result, self.clock.now())
        if status == "done":
            self.stats.done += 1
        else:
            self.stats.failed += 1
        await self._ack(cmd, status, reason, result)

    async def _duplicate(self, cmd: Command, entry: Entry) -> None:
        """A retry of a taken id. Still running: ``accepted`` again, because ``duplicate`` is final for the
        coordinator and would make it drop the ``done`` still to come. Finished: ``duplicate`` carrying the
        original outcome (``original``) and result, so the coordinator judges it as the first run went."""
        self.stats.duplicates += 1
        if entry.status == "accepted":
            reason = "already running: this command id was taken before; its outcome will be acked when it ends"
            await self._ack(cmd, "accepted", reason)
            return
        detail = f" ({entry.reason})" if entry.reason else ""
        reason = f"duplicate: this command id already ran; original status {entry.status}{detail}"
        original: Outcome = "done" if entry.status == "done" else "failed"
        await self._ack(cmd, "duplicate", reason, entry.result, original)

    async def _reject(self, cmd: Command, reason: str, result: dict[str, Any] | None = None) -> None:
        self.stats.rejected += 1
        log.warning("command rejected", command_id=cmd.command_id, action=cmd.action, reason=reason)
        await self._ack(cmd, "rejected", reason, result or {})

    async def _ack(
        self,
        cmd: Command,
        status: AckStatus,
        reason: str | None = None,
        result: dict[str, Any] | None = None,
        original: Outcome | None = None,
    ) -> None:
        ack = CommandAck(
            command_id=cmd.command_id,
            node_id=self.node_id,
            epoch=cmd.epoch,
            status=status,
            reason=reason,
            result=result or {},
            original=original,
        )
        try:
            await self._acks.send(ack)
        except Exception as exc:
            self.stats.ack_errors += 1
            log.warning("command ack not sent", status=status, command_id=cmd.command_id, error=str(exc))


def _as_result(value: Mapping[str, Any] | msgspec.Struct | None) -> dict[str, Any]:
    """The action's result (a result Struct of ``myolo.events.payloads.commands``, or a mapping) as plain JSON data:
    it travels in the ack and is kept in the ledger."""
    if value is None:
        return {}
    result = msgspec.to_builtins(value if isinstance(value, msgspec.Struct) else dict(value))
    msgspec.json.encode(result)  # fails here, as this command's failure, if it cannot travel
    return result
