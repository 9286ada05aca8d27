"""The command path's logic on simulated time, with the broker replaced by a recorder of what would be
written, in order (the same path against the real broker: tests/integration/coordinator/test_commands*)."""

from __future__ import annotations

import asyncio

import pytest

from myolo.common.clock import SimClock
from myolo.coordinator.commands.dispatcher import Dispatcher
from myolo.coordinator.commands.records import STATE_COMMANDS, CommandIntent
from myolo.coordinator.core.errors import NotLeader
from myolo.events.errors import InvalidEvent
from myolo.events.payloads import Command, CommandAck
from myolo.events.payloads.commands import DrainArgs, ReportSampleArgs, SetIntervalArgs, StartWorkersArgs, action_args


class Recorder:
    """Plays StateStore.put/delete and EventProducer.send, logging each call in one ordered list."""

    def __init__(self) -> None:
        self.log: list[tuple] = []
        self.fail = False

    async def put(self, topic, key, record) -> None:
        if self.fail:
            raise ConnectionError("broker away")
        self.log.append(("put", topic, key, record))

    async def delete(self, topic, key, kind) -> None:
        self.log.append(("delete", topic, key))

    async def send(self, payload) -> None:
        self.log.append(("send", payload))

    def sends(self) -> list[Command]:
        return [e[1] for e in self.log if e[0] == "send"]


def make(clock: SimClock, **kw) -> tuple[Dispatcher, Recorder]:
    rec = Recorder()
    return Dispatcher(rec, rec, clock, instance_id="c1", **kw), rec  # type: ignore[arg-type]


async def test_intent_is_written_before_the_command() -> None:
    d, rec = make(SimClock())
    with pytest.raises(NotLeader):
        await d.issue("n1", ReportSampleArgs())
    await d.lead(3)
    intent = await d.issue("n1", SetIntervalArgs(interval_s=2))
    kinds = [e[0] for e in rec.log]
    assert kinds == ["put", "send"]
    put, send = rec.log[0], rec.log[1][1]
    assert put[1] == STATE_COMMANDS and put[2] == intent.command_id and put[3].status == "pending"
    assert (send.command_id, send.epoch, send.action, send.args, send.issued_by) == (
        intent.command_id,
        3,
        "set_interval",
        {"interval_s": 2},
        "c1",
    )


async def test_a_failed_intent_write_sends_nothing() -> None:
    d, rec = make(SimClock())
    await d.lead(1)
    rec.fail = True
    with pytest.raises(ConnectionError):
        await d.issue("n1", ReportSampleArgs())
    assert rec.sends() == []


START = {"job_id": "j", "generation": 1, "gpus": [0], "master_addr": "10.0.0.1", "master_port": 29500}


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (DrainArgs(draining="yes"), "args.draining"),  # type: ignore[arg-type]
        (SetIntervalArgs(interval_s=0.0), "args.interval_s"),
        (SetIntervalArgs(interval_s=True), "args.interval_s"),
        (StartWorkersArgs(node_rank=2, nnodes=2, **START), "args.node_rank"),  # type: ignore[arg-type]
    ],
)
async def test_bad_commands_are_refused_before_anything_is_written(args, match) -> None:
    d, rec = make(SimClock())
    await d.lead(1)
    with pytest.raises(ValueError, match=match):
        await d.issue("n1", args)
    assert rec.log == []


def test_an_action_agents_do_not_execute_is_refused_by_name() -> None:
    with pytest.raises(InvalidEvent, match="'reboot' is not an action agents execute"):
        action_args("reboot", {})


async def test_retries_keep_the_id_then_expire() -> None:
    clock = SimClock()
    d, rec = make(clock, retry_after_s=5.0, max_attempts=3)
    await d.lead(1)
    intent = await d.issue("n1", ReportSampleArgs())
    await clock.advance(4.9)
    assert await d.retry_due() == 0
    await clock.advance(0.1)
    assert await d.retry_due() == 1
    await clock.advance(5.0)
    assert await d.retry_due() == 1
    await clock.advance(5.0)
    assert await d.retry_due() == 0
    final = d.intents[intent.command_id]
    assert final.status == "expired" and final.attempts == 3 and "3 attempts" in final.reason
    assert [c.command_id for c in rec.sends()] == [intent.command_id] * 3


async def test_acks_finish_commands_and_stale_rejections_are_ignored() -> None:
    clock = SimClock()
    d, rec = make(clock)
    await d.lead(2)
    a = await d.issue("n1", ReportSampleArgs())
    ack = CommandAck(command_id=a.command_id, node_id="n1", epoch=1, status="rejected", reason="stale epoch")
    assert (await d.on_ack(ack)).status == "pending"  # an older term's send was fenced; ours will go through
    assert (
        await d.on_ack(CommandAck(command_id=a.command_id, node_id="n1", epoch=2, status="accepted"))
    ).status == "accepted"
    await clock.advance(60)
    assert await d.retry_due() == 0  # accepted: the agent has it, no more retries
    done = await d.on_ack(CommandAck(command_id=a.command_id, node_id="n1", epoch=2, status="done", result={"ok": 1}))
    assert done.status == "done" and done.result == {"ok": 1} and done.finished == clock.now()
    assert rec.log[-1][3].status == "done"  # recorded
    assert await d.on_ack(CommandAck(command_id="unknown", node_id="n1", epoch=2, status="done")) is None


async def test_a_new_leader_resends_unfinished_commands_with_the_same_id_and_its_epoch() -> None:
    clock = SimClock()
    d, rec = make(clock)
    pending = CommandIntent(command_id="p1", node_id="n1", action="report_sample", epoch=4, created=1.0, attempts=1)
    finished = CommandIntent(command_id="d1", node_id="n1", action="report_sample", epoch=4, created=0.5, status="done")
    d.apply_state("p1", pending)
    d.apply_state("d1", finished)
    d.apply_state("gone", pending)
    d.apply_state("gone", None)  # a tombstone
    assert set(d.intents) == {"p1", "d1"}
    assert await d.lead(5) == 1
    [cmd] = rec.sends()
    assert (cmd.command_id, cmd.epoch) == ("p1", 5) and d.intents["p1"].attempts == 2
    d.apply_state("p1", pending)  # while leading, memory is ahead of the log: an echo does not roll it back
    assert d.intents["p1"].epoch == 5
    d.step_down()
    with pytest.raises(NotLeader):
        await d.issue("n1", ReportSampleArgs())


async def test_an_outcome_acked_while_nobody_led_is_learnt_from_the_new_leader_s_resend() -> None:
    clock = SimClock()
    d, rec = make(clock)
    await d.lead(1)
    intent = await d.issue("n1", ReportSampleArgs())
    ack = {"command_id": intent.command_id, "node_id": "n1"}
    assert (await d.on_ack(CommandAck(epoch=1, status="accepted", **ack))).status == "accepted"
    d.step_down()  # the leader is gone; the agent's done ack arrives while nobody leads and is dropped
    assert (await d.on_ack(CommandAck(epoch=1, status="done", **ack))).status == "accepted"
    assert await d.lead(2) == 1  # the accepted command is resent, same id, the new epoch
    resend = rec.sends()[-1]
    assert (resend.command_id, resend.epoch) == (intent.command_id, 2)
    dup = await d.on_ack(CommandAck(epoch=2, status="duplicate", original="done", **ack))
    assert dup.outcome == "done" and dup.terminal
    assert await d.lead(3) == 0  # nothing unfinished is left to resend


async def test_finished_commands_are_forgotten_after_an_hour() -> None:
    clock = SimClock()
    d, rec = make(clock)
    await d.lead(1)
    a = await d.issue("n1", ReportSampleArgs())
    await d.on_ack(CommandAck(command_id=a.command_id, node_id="n1", epoch=1, status="done"))
    await clock.advance(3601)
    await d.retry_due()
    assert a.command_id not in d.intents and rec.log[-1] == ("delete", STATE_COMMANDS, a.command_id)


async def test_has_pending() -> None:
    d, _ = make(SimClock())
    await d.lead(1)
    a = await d.issue("n1", ReportSampleArgs())
    assert d.has_pending("n1", "report_sample") and not d.has_pending("n2", "report_sample")
    await d.on_ack(CommandAck(command_id=a.command_id, node_id="n1", epoch=1, status="done"))
    assert not d.has_pending("n1", "report_sample")


async def test_a_retry_running_while_a_command_is_issued_does_not_send_it_twice() -> None:
    clock = SimClock()
    d, rec = make(clock, retry_after_s=2.0)
    await d.lead(1)
    await clock.advance(10.0)
    gate = asyncio.Event()
    real_put = rec.put

    async def slow_put(topic, key, record) -> None:
        await gate.wait()  # the intent write is on its way to the broker
        await real_put(topic, key, record)

    rec.put = slow_put  # type: ignore[method-assign]
    issuing = asyncio.create_task(d.issue("n1", ReportSampleArgs()))
    await asyncio.sleep(0)
    retrying = asyncio.create_task(d.retry_due())  # a tick, while the intent is being written
    await asyncio.sleep(0)
    gate.set()
    intent, resent = await asyncio.gather(issuing, retrying)
    assert resent == 0 and intent.attempts == 1 and len(rec.sends()) == 1


async def test_every_send_carries_its_own_expiry() -> None:
    clock = SimClock()
    d, rec = make(clock, retry_after_s=5.0, expire_after_s=300.0)
    await d.lead(3)
    await d.issue("n1", ReportSampleArgs())
    first = rec.sends()[-1]
    assert first.expires_at == pytest.approx(clock.now() + 300.0)
    await clock.advance(6.0)
    assert await d.retry_due() == 1
    again = rec.sends()[-1]
    assert again.command_id == first.command_id and again.expires_at == pytest.approx(clock.now() + 300.0)


async def test_a_duplicate_ack_is_judged_by_the_original_outcome_it_carries() -> None:
    clock = SimClock()
    d, rec = make(clock)
    await d.lead(1)
    ok, bad, old = [await d.issue("n1", ReportSampleArgs()) for _ in range(3)]
    dup = {"node_id": "n1", "epoch": 1, "status": "duplicate"}
    done = await d.on_ack(CommandAck(command_id=ok.command_id, original="done", result={"ok": 1}, **dup))
    assert done.status == "duplicate" and done.original == "done" and done.outcome == "done" and done.terminal
    assert done.result == {"ok": 1} and rec.log[-1][3].original == "done"  # recorded with the outcome
    failed = await d.on_ack(CommandAck(command_id=bad.command_id, original="failed", **dup))
    assert failed.outcome == "failed"
    unknown = await d.on_ack(CommandAck(command_id=old.command_id, **dup))  # says nothing of the first run
    assert unknown.outcome == "failed"
