"""The commands component: intents in ``myolo.state.commands``, signed commands to agents, acks, retries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import structlog

from myolo.coordinator.commands import routes
from myolo.coordinator.commands.answers import sent_command
from myolo.coordinator.commands.config import DispatchConfig, check
from myolo.coordinator.commands.dispatcher import Dispatcher
from myolo.coordinator.commands.interface import CommandSender, SentCommand
from myolo.coordinator.commands.records import STATE_COMMANDS, CommandIntent
from myolo.coordinator.core.component import Component, RouteSet, StateTopic
from myolo.coordinator.core.context import Context
from myolo.events.bus import RecordInfo
from myolo.events.envelope import Event
from myolo.events.payloads import CommandAck
from myolo.events.payloads.commands import ActionArgs

log = structlog.get_logger("myolo.coordinator.commands")


class Commands(Component):
    name = "commands"
    provides = (CommandSender,)
    openapi = Path(__file__).with_name("openapi.yaml")
    config = DispatchConfig
    consumes = (CommandAck,)
    owns = (
        StateTopic(
            STATE_COMMANDS,
            {"command": CommandIntent},
            partitions=6,
            key="command id",
            description="coordinator state: command intents and outcomes",
            backup=False,  # restoring pending intents would make the next leader send them again
        ),
    )

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        cfg: DispatchConfig = ctx.config
        self.dispatcher = Dispatcher(
            ctx.store,
            ctx.signed,
            ctx.clock,
            instance_id=ctx.instance_id,
            retry_after_s=cfg.retry_after_s,
            max_attempts=cfg.max_attempts,
            expire_after_s=cfg.expire_after_s,
        )

    @classmethod
    def check_config(cls, section: DispatchConfig, core: Any) -> None:
        check(section, core)

    # ---- CommandSender --------------------------------------------------------------------------------------
    async def issue(self, node_id: str, args: ActionArgs) -> SentCommand:
        self.ctx.leadership.require()  # NotLeader names the leader, for a caller to redirect to
        return sent_command(await self.dispatcher.issue(node_id, args))

    def has_pending(self, node_id: str, action: str) -> bool:
        return self.dispatcher.has_pending(node_id, action)

    def intent(self, command_id: str) -> SentCommand | None:
        found = self.dispatcher.intents.get(command_id)
        return None if found is None else sent_command(found)

    def intents(self) -> list[CommandIntent]:
        """Every command remembered (finished ones for an hour), oldest first."""
        return sorted(self.dispatcher.intents.values(), key=lambda i: i.created)

    # ---- hooks ----------------------------------------------------------------------------------------------
    async def on_event(self, event: Event, info: RecordInfo) -> None:
        ack = event.data
        assert isinstance(ack, CommandAck)
        try:
            await self.dispatcher.on_ack(ack)
        except Exception as exc:  # the ack is re-sent as "duplicate" when we retry: nothing is lost
            log.warning("ack not recorded", command_id=ack.command_id, error=str(exc))

    def on_state(self, topic: str, key: str, record: msgspec.Struct | None, kind: str) -> None:
        if record is None or isinstance(record, CommandIntent):
            self.dispatcher.apply_state(key, record)

    async def on_lead(self, epoch: int) -> None:
        resent = await self.dispatcher.lead(epoch)
        log.info("commands resumed", epoch=epoch, resent=resent)

    def on_step_down(self) -> None:
        self.dispatcher.step_down()

    async def tick(self, now: float) -> None:
        if self.dispatcher.epoch is None:
            return
        try:
            await self.dispatcher.retry_due()
        except Exception as exc:
            log.warning("command retries failed this tick", error=str(exc))

    def api(self) -> RouteSet:
        return RouteSet(routes.routes(self), self.openapi)

    def stats(self) -> dict[str, int]:
        return {"commands_sent": self.dispatcher.sent}

    def status(self) -> dict[str, Any]:
        return {"commands": msgspec.to_builtins(self.intents())}
