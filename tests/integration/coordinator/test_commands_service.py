"""The command path against the real broker, on simulated time: the intent is in the state topic before the
signed command is on the commands topic; an unacknowledged command is resent with the same id; an ack
finishes it; a command nobody acknowledges expires after ``max_attempts``; a standby refuses to send."""

from __future__ import annotations

import uuid

import pytest

from myolo.common.keys import load_verify_key
from myolo.coordinator.commands.records import STATE_COMMANDS, CommandIntent
from myolo.coordinator.core.errors import NotLeader
from myolo.events.codec import decode
from myolo.events.payloads import Command, CommandAck, GpuReading, NodeSample
from myolo.events.payloads.commands import ReportSampleArgs, SetIntervalArgs
from myolo.events.signing import Verifier
from myolo.events.topics import COMMANDS
from tests.integration.coordinator.conftest import commands, fleet, one_leader, read_topic, state_records, wait_until
from tests.support.coordinator.identity import PlayedNodes


async def commands_for(settings, node: str) -> list:
    out = []
    for k, v, h in await read_topic(settings, COMMANDS):
        if k == node:
            out.append(decode(v, h, k.encode()))
    return out


async def test_intent_signed_command_retry_ack_expiry(
    settings, make_config, services, producer, key_file, clock
) -> None:
    tag = uuid.uuid4().hex[:6]
    node, silent = f"n-{tag}", f"s-{tag}"
    # nodes stay un-Lost however long the simulated retries take: liveness and its drains are tested elsewhere
    env = {
        "MYOLO_COMMANDS_RETRY_AFTER_S": "2.0",
        "MYOLO_COMMANDS_MAX_ATTEMPTS": "3",
        "MYOLO_FLEET_LOST_AFTER_S": "3600",
    }
    svc = await services.start(make_config(f"c-{tag}", **env), clock)
    standby = await services.start(make_config(f"d-{tag}", **env), clock)
    if await one_leader(svc, standby) is standby:
        svc, standby = standby, svc
    await wait_until(lambda: svc.ingest.ready.is_set(), 30, "ingest")
    played = PlayedNodes(producer, clock)  # the node signs its acks with its enrolled key
    await played.enroll(svc, node, everywhere=[standby])
    gpus = [GpuReading(index=0, uuid="GPU-0", name="sim")]
    while not (fleet(svc).node(node) and fleet(svc).node(silent)):
        for n in (node, silent):
            await producer.send(NodeSample(node_id=n, backend="sim", gpus=gpus))
        await wait_until(lambda: True)

    with pytest.raises(ValueError, match=r"args\.interval_s"):
        await commands(svc).issue(node, SetIntervalArgs(interval_s=-1))
    await wait_until(
        lambda: fleet(svc).node(node) is not None and fleet(standby).node(node) is not None, 30, "standby view"
    )
    with pytest.raises(NotLeader) as exc:
        await commands(standby).issue(node, ReportSampleArgs())
    assert exc.value.leader_id == svc.instance_id

    intent = await commands(svc).issue(node, SetIntervalArgs(interval_s=2.0))
    sent = await commands_for(settings, node)
    assert len(sent) == 1
    Verifier([load_verify_key(f"{key_file}.pub", "key")]).verify(sent[0])  # signed with the configured key
    cmd = sent[0].data
    assert isinstance(cmd, Command) and cmd.command_id == intent.command_id and cmd.epoch == svc.epoch
    assert cmd.args == {"interval_s": 2.0} and cmd.issued_by == svc.instance_id
    recorded = await state_records(settings, STATE_COMMANDS, intent.command_id)
    assert recorded and isinstance(recorded[0], CommandIntent) and recorded[0].status == "pending"

    # no ack within retry_after_s: sent again, same id
    await clock.advance(2.5)
    await wait_until(lambda: commands(svc).dispatcher.intents[intent.command_id].attempts == 2, 30, "retry")
    again = await commands_for(settings, node)
    assert [e.data.command_id for e in again] == [intent.command_id] * 2 and again[0].id != again[1].id

    # the agent acknowledges: done, recorded; no more retries
    await played.send(
        CommandAck(
            command_id=intent.command_id, node_id=node, epoch=svc.epoch, status="done", result={"interval_s": 2.0}
        )
    )
    await wait_until(lambda: commands(svc).dispatcher.intents[intent.command_id].status == "done", 30, "done")
    await wait_until(
        lambda: (
            intent.command_id in commands(standby).dispatcher.intents
            and commands(standby).dispatcher.intents[intent.command_id].status == "done"
        ),
        30,
        "standby sees done",
    )
    await clock.advance(5.0)
    assert len(await commands_for(settings, node)) == 2

    # a node that never answers: expired after max_attempts, with the reason
    lost = await commands(svc).issue(silent, ReportSampleArgs())
    for attempts in (2, 3):
        await clock.advance(2.5)  # the retry does broker I/O: let it finish before time moves on
        await wait_until(
            lambda a=attempts: commands(svc).dispatcher.intents[lost.command_id].attempts == a, 30, "a retry"
        )
        # both coordinators' tick loops (they share the clock) wait again, so the next advance reaches both
        await wait_until(lambda: clock.pending() >= 2, 30, "the tick loops waiting again")
    await clock.advance(2.5)
    await wait_until(lambda: commands(svc).dispatcher.intents[lost.command_id].status == "expired", 30, "expiry")
    final = commands(svc).dispatcher.intents[lost.command_id]
    assert final.attempts == 3 and "3 attempts" in final.reason
    assert len(await commands_for(settings, silent)) == 3
