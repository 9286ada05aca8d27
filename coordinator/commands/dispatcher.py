"""The command path: intent to the state topic, then the signed command, then acks, retries with the same id.

Only the leader sends. Each intent is written (and acknowledged) before its command goes out, so a new leader
finds every command the old one may have sent and resends the unfinished ones with the SAME command id and
its own, newer epoch: the agent executes each id once and answers ``duplicate`` to the rest, and rejects any
command whose epoch is older than one it has seen, which fences a deposed leader.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import structlog

from myolo.common.clock import Clock
from myolo.coordinator.commands.records import STATE_COMMANDS, CommandIntent
from myolo.coordinator.core.errors import NotLeader
from myolo.coordinator.state import StateStore
from myolo.events.bus import EventProducer
from myolo.events.envelope import new_id
from myolo.events.errors import InvalidEvent
from myolo.events.payloads import Command, CommandAck
from myolo.events.payloads.commands import ActionArgs, action_args

KEEP_FINISHED_S = 3600.0
log = structlog.get_logger("myolo.coordinator.commands")


def check_args(args: ActionArgs) -> dict[str, Any]:
    """The arguments as they travel, once checked: a command the agent could not execute is refused here,
    where the caller can still be told why (``ValueError`` naming the argument).

    The same checks the agent runs (``myolo.events.payloads.commands.action_args``): one definition of each action."""
    wire = msgspec.to_builtins(msgspec.structs.asdict(args))  # every field, defaults too: the command says all
    try:
        action_args(args.action, wire)
    except InvalidEvent as exc:
        raise ValueError(str(exc)) from None
    return wire


class Dispatcher:
    """Command intents by id; ``epoch`` is set while this coordinator leads, None otherwise."""

    def __init__(
        self,
        store: StateStore,
        producer: EventProducer,
        clock: Clock,
        *,
        instance_id: str,
        retry_after_s: float = 5.0,
        max_attempts: int = 5,
        expire_after_s: float = 300.0,
    ) -> None:
        self.intents: dict[str, CommandIntent] = {}
        self.epoch: int | None = None
        self.sent = 0
        self._store = store
        self._producer = producer
        self._clock = clock
        self._instance = instance_id
        self._retry_after_s = retry_after_s
        self._max_attempts = max_attempts
        self._expire_after_s = expire_after_s
        self._lock = asyncio.Lock()

    # ---- state --------------------------------------------------------------------------------------------
    def apply_state(self, key: str, intent: CommandIntent | None) -> None:
        """A record from the state topic. While leading, memory is ahead of the log (we wrote it): ignore."""
        if self.epoch is not None:
            return
        if intent is None:
            self.intents.pop(key, None)
        else:
            self.intents[key] = intent

    def unfinished(self) -> list[CommandIntent]:
        """Sent and not finished: not acknowledged yet, or accepted and its outcome still to come."""
        return [i for i in self.intents.values() if not i.terminal]

    def has_pending(self, node_id: str, action: str) -> bool:
        """Is such a command already on its way (so a reaction does not pile up copies of it)?"""
        return any(i.node_id == node_id and i.action == action and not i.terminal for i in self.intents.values())

    # ---- leadership ---------------------------------------------------------------------------------------
    async def lead(self, epoch: int) -> int:
        """Start leading in ``epoch``: resend every unfinished command now, same id, new epoch. An accepted one
        too: its outcome may have been acknowledged while nobody led (acks are dropped then), and the agent
        answers the resend with ``duplicate`` and that outcome, or ``accepted`` again while it still runs."""
        self.epoch = epoch
        resent = 0
        for intent in sorted(self.unfinished(), key=lambda i: i.created):
            if self.epoch != epoch:
                break
            await self._send(intent, self._clock.now())
            resent += 1
        return resent

    def step_down(self) -> None:
        self.epoch = None

    # ---- the command path ---------------------------------------------------------------------------------
    async def issue(self, node_id: str, args: ActionArgs) -> CommandIntent:
        """Send ``args.action`` with ``args`` to the node (see :class:`CommandSender`)."""
        wire = check_args(args)
        if self.epoch is None:
            raise NotLeader()
        now = self._clock.now()
        intent = CommandIntent(
            command_id=new_id(),
            node_id=node_id,
            action=args.action,
            args=wire,
            epoch=self.epoch,
            created=now,
            issued_by=self._instance,
        )
        # remembered only once written and sent (inside _send): a retry running meanwhile must not see a
        # half-made intent and send it a second time
        return await self._send(intent, now)

    async def on_ack(self, ack: CommandAck) -> CommandIntent | None:
        intent = self.intents.get(ack.command_id)
        if intent is None or self.epoch is None or intent.terminal:
            return intent
        if ack.status == "rejected" and ack.epoch < self.epoch:
            return intent  # an older term's send was fenced; our retry carries the current epoch
        if ack.status == "accepted" and intent.status != "pending":
            return intent
        async with self._lock:
            changed = msgspec.structs.replace(
                intent,
                status=ack.status,
                reason=ack.reason,
                result=ack.result or intent.result,
                original=ack.original,
                finished=None if ack.status == "accepted" else self._clock.now(),
            )
            await self._store.put(STATE_COMMANDS, intent.command_id, changed)
            self.intents[intent.command_id] = changed
        return changed

    async def retry_due(self) -> int:
        """Resend what was not acknowledged in time (same id); give up after ``max_attempts``. Returns resends."""
        if self.epoch is None:
            return 0
        now = self._clock.now()
        resent = 0
        for intent in list(self.intents.values()):
            if intent.status == "pending" and (intent.last_sent or 0) + self._retry_after_s <= now:
                if intent.attempts >= self._max_attempts:
                    reason = f"no acknowledgement after {intent.attempts} attempts"
                    await self._update(intent, status="expired", reason=reason, finished=now)
                else:
                    await self._send(intent, now)
                    resent += 1
            elif intent.terminal and (intent.finished or now) + KEEP_FINISHED_S < now:
                async with self._lock:
                    await self._store.delete(STATE_COMMANDS, intent.command_id, "command")
                    self.intents.pop(intent.command_id, None)
        return resent

    async def _send(self, intent: CommandIntent, now: float) -> CommandIntent:
        epoch = self.epoch
        if epoch is None:
            raise NotLeader()
        async with self._lock:
            updated = msgspec.structs.replace(intent, epoch=epoch, attempts=intent.attempts + 1, last_sent=now)
            await self._store.put(STATE_COMMANDS, intent.command_id, updated)  # the intent first, then the act
            self.intents[intent.command_id] = updated
            if self.epoch != epoch:
                raise NotLeader()
            command = Command(
                command_id=intent.command_id,
                node_id=intent.node_id,
                epoch=epoch,
                action=intent.action,
                args=intent.args,
                issued_by=self._instance,
                expires_at=now + self._expire_after_s,  # each send its own: a retry is as fresh as its send
            )
            await self._producer.send(command)
            self.sent += 1
        log.info(
            "command sent",
            command_id=intent.command_id,
            node=intent.node_id,
            action=intent.action,
            epoch=epoch,
            attempt=updated.attempts,
        )
        return updated

    async def _update(self, intent: CommandIntent, **changes: Any) -> None:
        async with self._lock:
            changed = msgspec.structs.replace(intent, **changes)
            await self._store.put(STATE_COMMANDS, intent.command_id, changed)
            self.intents[intent.command_id] = changed
