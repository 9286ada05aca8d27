"""Commands through the real broker: a coordinator-like producer signs commands onto myolo.commands, the
agent's executor consumes them for its node, runs each id once, fences an older epoch, and its acks arrive on
myolo.command.acks. The agent is then restarted (new executor, same state dir and consumer group) and still
remembers what it ran and the epoch it saw."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from myolo.agent.commands import CommandExecutor, build_command_consumer
from myolo.common.clock import SystemClock
from myolo.common.keys import Ed25519Signer
from myolo.events.bus import EventConsumer, EventProducer
from myolo.events.codec import encode
from myolo.events.payloads import Command, CommandAck
from myolo.events.payloads.commands import ReportSampleArgs, SetIntervalArgs
from myolo.events.settings import KafkaSettings
from myolo.events.signing import Verifier, sign
from myolo.events.topics import COMMAND_ACKS, COMMANDS
from tests.support.helpers import wait_until

pytestmark = pytest.mark.kafka
KEY = Ed25519Signer.generate()  # the coordinators'; agents hold its public half


class Daemon:
    """The daemon's side of the actions: counts every execution."""

    def __init__(self) -> None:
        self.interval_s = 1.0
        self.calls: list[str] = []

    async def set_interval(self, args: SetIntervalArgs) -> dict[str, Any]:
        self.calls.append("set_interval")
        previous, self.interval_s = self.interval_s, args.interval_s
        return {"interval_s": args.interval_s, "previous_s": previous}

    async def report_sample(self, _: ReportSampleArgs) -> dict[str, Any]:
        self.calls.append("report_sample")
        return {"seq": 1}


class RunningAgent:
    """Executor + command consumer of one node, as the daemon runs them."""

    def __init__(self, settings: KafkaSettings, node: str, state_dir, daemon: Daemon, out: EventProducer) -> None:
        actions = {"set_interval": daemon.set_interval, "report_sample": daemon.report_sample}
        self.executor = CommandExecutor(node, state_dir, Verifier([KEY.public]), out, actions, SystemClock())
        self.consumer = build_command_consumer(settings, node, self.executor, dead_letters=out)
        self.task = asyncio.create_task(self.consumer.run())

    async def stop(self) -> None:
        await self.consumer.stop()
        await asyncio.wait_for(self.task, 30)
        await self.executor.close()


def ack_reader(settings: KafkaSettings, node: str, out: EventProducer, acks: list[CommandAck]) -> EventConsumer:
    async def handler(event, info) -> None:
        if isinstance(event.data, CommandAck) and event.data.node_id == node:
            acks.append(event.data)

    return EventConsumer(settings, [COMMAND_ACKS], f"it-acks-{uuid.uuid4().hex}", handler, dead_letters=out)


def statuses(acks: list[CommandAck], command_id: str) -> list[str]:
    return [a.status for a in acks if a.command_id == command_id]


async def test_commands_are_executed_once_fenced_and_acked_across_a_restart(settings, tmp_path) -> None:
    node = f"it-node-{uuid.uuid4().hex[:8]}"
    daemon = Daemon()
    acks: list[CommandAck] = []

    def cmd(command_id: str, action: str = "set_interval", epoch: int = 2, **kw: Any) -> Command:
        args = kw.pop("args", {"interval_s": 2.0} if action == "set_interval" else {})
        return Command(command_id=command_id, node_id=kw.pop("node", node), epoch=epoch, action=action, args=args)

    def seen(command_id: str, *expected: str) -> bool:
        return statuses(acks, command_id) == list(expected)

    async with (
        EventProducer(settings, source="/myolo/coordinator/it", signer=KEY) as leader,
        EventProducer(settings, source=f"/myolo/agent/{node}") as out,
    ):
        reader = ack_reader(settings, node, out, acks)
        reader_task = asyncio.create_task(reader.run())
        agent = RunningAgent(settings, node, tmp_path, daemon, out)
        try:
            await leader.send(cmd("c1", args={"interval_s": 2.0}))
            await leader.send(cmd("c2", "report_sample"))
            await leader.send(cmd("theirs", node=f"{node}-other", epoch=9))  # another node's: skipped
            await wait_until(lambda: seen("c1", "accepted", "done") and seen("c2", "accepted", "done"), what="c1, c2")
            assert next(a for a in acks if a.status == "done" and a.command_id == "c1").result == {
                "interval_s": 2.0,
                "previous_s": 1.0,
            }
            await leader.send(cmd("c1", args={"interval_s": 2.0}))  # a retry: new event, same command id
            await leader.send(cmd("stale", epoch=1, args={"interval_s": 8.0}))  # the old leader's epoch
            forged = encode(sign(leader.event(cmd("forged", epoch=3, args={"interval_s": 3.0})), KEY))
            await out.send_raw(COMMANDS, forged[1].replace(b"3.0", b"30.0"), forged[0], forged[2])
            await wait_until(
                lambda: (
                    seen("c1", "accepted", "done", "duplicate")
                    and seen("stale", "rejected")
                    and seen("forged", "rejected")
                ),
                what="duplicate, stale and forged acks",
            )
            # the forged record, kept with its reason: its rejection is acked before its dead letter is written
            await wait_until(lambda: agent.consumer.stats.dead_lettered == 1, what="the forged record dead-lettered")
            assert agent.consumer.stats.skipped >= 1  # the other node's command, skipped by its key
            await agent.stop()

            agent = RunningAgent(settings, node, tmp_path, daemon, out)  # restarted: same dir, same group
            await leader.send(cmd("c1", args={"interval_s": 2.0}))
            await leader.send(cmd("stale-2", epoch=1))
            await leader.send(cmd("c3", "report_sample", epoch=2))
            await wait_until(
                lambda: (
                    len(statuses(acks, "c1")) == 4 and seen("stale-2", "rejected") and seen("c3", "accepted", "done")
                ),
                what="acks after the restart",
            )
        finally:
            await agent.stop()
            await reader.stop()
            await asyncio.wait_for(reader_task, 30)

    assert daemon.calls == ["set_interval", "report_sample", "report_sample"]  # c1 once, c2, c3
    assert daemon.interval_s == 2.0  # neither the stale nor the forged interval was applied
    assert statuses(acks, "c1") == ["accepted", "done", "duplicate", "duplicate"]
    stale = next(a for a in acks if a.command_id == "stale")
    assert stale.result == {"seen_epoch": 2} and "stale epoch" in (stale.reason or "")
    forged_ack = next(a for a in acks if a.command_id == "forged")
    assert "signature rejected: signature does not match" in (forged_ack.reason or "")
    assert all(a.epoch == 1 for a in acks if a.command_id.startswith("stale"))
    assert not [a for a in acks if a.command_id == "theirs"]
