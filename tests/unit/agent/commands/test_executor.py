"""The agent's command executor, driven through the real consumer path (codec, signature check,
dead-lettering) without a broker: records go to :meth:`EventConsumer.process` one by one, as its poll loop
would hand them. Real HMAC signing, a real ledger in a temp dir, restarts as new executors on the same dir."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiokafka.structs import ConsumerRecord

from myolo.agent.commands import CommandExecutor, build_command_consumer
from myolo.common.clock import SimClock
from myolo.common.keys import HmacKey
from myolo.events.bus import EventConsumer
from myolo.events.codec import encode
from myolo.events.deadletter import dead_letter_info
from myolo.events.envelope import Event, new_event
from myolo.events.payloads import Command, CommandAck, Payload
from myolo.events.payloads.commands import ReportSampleArgs, SetIntervalArgs
from myolo.events.settings import KafkaSettings
from myolo.events.signing import Verifier, sign
from myolo.events.topics import COMMANDS

KEY = HmacKey("coordinator", b"c" * 32)
OTHER_KEY = HmacKey("intruder", b"i" * 32)
NODE = "gpu-node-1"
HANDLER_DEADLINE_S = 10.0
_offsets = itertools.count()


class AckLog:
    """Stands in for the producer on myolo.command.acks: keeps every ack sent, in order."""

    def __init__(self) -> None:
        self.acks: list[CommandAck] = []

    async def send(self, payload: Payload) -> None:
        assert isinstance(payload, CommandAck)
        self.acks.append(payload)

    def of(self, command_id: str) -> list[tuple[str, str | None]]:
        return [(a.status, a.reason) for a in self.acks if a.command_id == command_id]

    def statuses(self, command_id: str) -> list[str]:
        return [a.status for a in self.acks if a.command_id == command_id]

    def last(self, command_id: str) -> CommandAck:
        return [a for a in self.acks if a.command_id == command_id][-1]


class DeadLetters:
    """Stands in for the dead-letter producer: keeps the reasons and the fields they name."""

    def __init__(self) -> None:
        self.reasons: list[str] = []
        self.fields: list[str | None] = []

    async def send_raw(self, topic: str, value: bytes | None, key: bytes | None, headers: list) -> None:
        info = dead_letter_info(headers)
        self.reasons.append(info["reason"])
        self.fields.append(info.get("field"))


@dataclass
class Daemon:
    """What the daemon's actions change, so tests see each execution."""

    interval_s: float = 1.0
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def set_interval(self, args: SetIntervalArgs) -> dict[str, Any]:
        previous, self.interval_s = self.interval_s, args.interval_s
        self.calls.append(("set_interval", {"interval_s": args.interval_s}))
        return {"interval_s": args.interval_s, "previous_s": previous}

    async def report_sample(self, _: ReportSampleArgs) -> dict[str, Any]:
        self.calls.append(("report_sample", {}))
        return {"seq": len(self.calls)}

    def actions(self) -> dict[str, Any]:
        return {"set_interval": self.set_interval, "report_sample": self.report_sample}


class Agent:
    """One executor plus its consumer, over a state dir that outlives it (restart = a new Agent)."""

    def __init__(
        self, state_dir: Path, clock: SimClock, daemon: Daemon, acks: AckLog, actions: dict | None = None, **kw: Any
    ) -> None:
        self.clock = clock
        self.acks = acks
        self.dead = DeadLetters()
        self.executor = CommandExecutor(
            NODE, state_dir, Verifier([KEY]), acks, actions or daemon.actions(), clock, **kw
        )
        settings = KafkaSettings(bootstrap="127.0.0.1:1")  # never connected: records are fed to process()
        self.consumer: EventConsumer = build_command_consumer(
            settings,
            NODE,
            self.executor,
            dead_letters=self.dead,  # type: ignore[arg-type]
        )

    async def feed(self, event: Event, *, tamper: tuple[bytes, bytes] | None = None) -> None:
        """Hand one record to the consumer, as its poll loop does; returns while a taken action runs."""
        key, value, headers = encode(event)
        if tamper is not None:  # the payload changed on the way, after it was signed
            assert tamper[0] in value
            value = value.replace(*tamper)
        record = ConsumerRecord(COMMANDS, 0, next(_offsets), 0, 0, key, value, None, 0, len(value), headers)
        # a handler error would make the consumer back off on the simulated clock, which never moves here:
        # bound it, so such a bug fails the test instead of hanging it
        await asyncio.wait_for(self.consumer.process(record), HANDLER_DEADLINE_S)

    async def deliver(self, event: Event, *, tamper: tuple[bytes, bytes] | None = None) -> None:
        """Feed, then wait until the action (if any) has run and every ack is sent."""
        await self.feed(event, tamper=tamper)
        await asyncio.wait_for(self.executor.drain(), HANDLER_DEADLINE_S)

    async def close(self) -> None:
        await self.executor.close()


def command(command_id: str, action: str = "set_interval", *, epoch: int = 1, node: str = NODE, **kw: Any) -> Command:
    args = kw.pop("args", {"interval_s": 5.0} if action == "set_interval" else {})
    return Command(command_id=command_id, node_id=node, epoch=epoch, action=action, args=args, **kw)


def signed(cmd: Command, clock: SimClock, key: HmacKey | None = KEY) -> Event:
    """A command event as the leader sends it: every send (a retry too) is a new event with a new id."""
    event = new_event(cmd, "/myolo/coordinator/test", clock=clock)
    return sign(event, key) if key is not None else event


@pytest.fixture
def clock() -> SimClock:
    return SimClock()


@pytest.fixture
def daemon() -> Daemon:
    return Daemon()


@pytest.fixture
def acks() -> AckLog:
    return AckLog()


@pytest.fixture
async def agent(tmp_path, clock, daemon, acks):
    a = Agent(tmp_path / "commands", clock, daemon, acks)
    yield a
    await a.close()


async def test_command_is_taken_run_and_acked_with_its_result(agent, daemon, acks, clock) -> None:
    await agent.deliver(signed(command("c1", args={"interval_s": 2.5}), clock))
    assert daemon.interval_s == 2.5
    assert acks.statuses("c1") == ["accepted", "done"]
    assert acks.last("c1").result == {"interval_s": 2.5, "previous_s": 1.0}
    assert acks.last("c1").node_id == NODE and acks.last("c1").epoch == 1
    await agent.deliver(signed(command("c2", "report_sample"), clock))
    assert acks.statuses("c2") == ["accepted", "done"]
    assert [name for name, _ in daemon.calls] == ["set_interval", "report_sample"]


async def test_retry_of_an_executed_id_is_a_duplicate_even_after_a_restart(tmp_path, clock, daemon, acks) -> None:
    first = Agent(tmp_path, clock, daemon, acks)
    await first.deliver(signed(command("c1", args={"interval_s": 3.0}), clock))
    await first.deliver(signed(command("c1", args={"interval_s": 3.0}), clock))  # a retry: new event, same id
    await first.close()
    second = Agent(tmp_path, clock, daemon, acks)  # the agent restarted
    await second.deliver(signed(command("c1", args={"interval_s": 3.0}), clock))
    await second.close()
    assert daemon.calls == [("set_interval", {"interval_s": 3.0})]  # executed once
    assert acks.statuses("c1") == ["accepted", "done", "duplicate", "duplicate"]
    dup = acks.last("c1")
    assert dup.result == {"interval_s": 3.0, "previous_s": 1.0}  # the original result
    assert dup.original == "done" and dup.outcome == "done"  # the first run's outcome, as a field
    assert "original status done" in (dup.reason or "")


async def test_older_epoch_is_rejected_and_the_fence_survives_a_restart(tmp_path, clock, daemon, acks) -> None:
    first = Agent(tmp_path, clock, daemon, acks)
    await first.deliver(signed(command("new-leader", epoch=5), clock))
    await first.deliver(signed(command("old-leader", epoch=4, args={"interval_s": 9.0}), clock))
    await first.close()
    second = Agent(tmp_path, clock, daemon, acks)
    await second.deliver(signed(command("old-leader-again", epoch=4, args={"interval_s": 9.0}), clock))
    await second.deliver(signed(command("same-epoch", "report_sample", epoch=5), clock))
    await second.close()
    assert daemon.interval_s == 5.0
    for cid in ("old-leader", "old-leader-again"):
        ack = acks.last(cid)
        assert (ack.status, ack.epoch, ack.result) == ("rejected", 4, {"seen_epoch": 5})
        assert "stale epoch: command epoch 4 is older than epoch 5" in (ack.reason or "")
    assert acks.statuses("same-epoch") == ["accepted", "done"]


async def test_a_newer_epoch_fences_even_when_its_command_is_rejected(agent, acks, clock, daemon) -> None:
    await agent.deliver(signed(command("bad", epoch=7, args={"interval_s": -1}), clock))
    assert acks.statuses("bad") == ["rejected"]
    assert agent.executor.ledger.epoch == 7
    await agent.deliver(signed(command("stale", epoch=6), clock))
    assert acks.statuses("stale") == ["rejected"] and daemon.calls == []


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("tampered", "signature does not match"),
        ("unsigned", "not signed"),
        ("other key", "unknown key id 'intruder'"),
    ],
)
async def test_forged_commands_are_dead_lettered_and_rejected(agent, acks, clock, daemon, how, reason) -> None:
    cmd = command("forged", epoch=99, args={"interval_s": 7.0})
    key = {"tampered": KEY, "unsigned": None, "other key": OTHER_KEY}[how]
    await agent.deliver(signed(cmd, clock, key), tamper=(b"7.0", b"70.0") if how == "tampered" else None)
    assert daemon.calls == []
    assert len(agent.dead.reasons) == 1 and reason in agent.dead.reasons[0]
    ack = acks.last("forged")
    assert ack.status == "rejected" and reason in (ack.reason or "") and "signature rejected" in (ack.reason or "")
    assert agent.executor.ledger.epoch == 0  # a forged epoch fences nothing
    await agent.deliver(signed(command("genuine", epoch=1), clock))
    assert acks.statuses("genuine") == ["accepted", "done"]


async def test_commands_for_other_nodes_are_skipped_not_dead_lettered(agent, acks, clock, daemon) -> None:
    """Keyed for another node: skipped unread, even when forged (its addressee dead-letters that one)."""
    await agent.deliver(signed(command("theirs", node="gpu-node-2", epoch=3), clock))
    await agent.deliver(signed(command("theirs-forged", node="gpu-node-2"), clock, OTHER_KEY))
    assert acks.acks == [] and daemon.calls == []
    assert agent.dead.reasons == [] and agent.consumer.stats.skipped == 2
    assert agent.executor.ledger.epoch == 0  # another node's command does not move this node's fence


async def test_expired_and_too_old_commands_are_rejected(tmp_path, clock, daemon, acks) -> None:
    agent = Agent(tmp_path, clock, daemon, acks, max_age_s=60.0)
    old = signed(command("old"), clock)
    expiring = command("expiring", expires_at=clock.now() + 40)
    await clock.advance(30)
    await agent.deliver(signed(expiring, clock))  # still valid
    await clock.advance(31)
    await agent.deliver(signed(command("expired", expires_at=clock.now() - 1), clock))
    await agent.deliver(old)  # issued 61 s ago
    await agent.close()
    assert acks.statuses("expiring") == ["accepted", "done"]
    assert acks.last("expired").status == "rejected" and "expired" in (acks.last("expired").reason or "")
    assert acks.last("old").status == "rejected" and "issued 61 s ago" in (acks.last("old").reason or "")
    assert len(daemon.calls) == 1


@pytest.mark.parametrize(
    ("action", "args", "field"),
    [
        ("set_interval", {}, "args.interval_s: missing"),
        ("set_interval", {"interval_s": "fast"}, "args.interval_s: Expected `float`, got `str`"),
        ("set_interval", {"interval_s": 0}, "args.interval_s: Expected `float` >= 0.05"),
        ("set_interval", {"interval_s": 1, "jitter": 2}, "args.jitter: unknown argument"),
        ("report_sample", {"full": True}, "args.full: unknown argument for report_sample"),
    ],
)
async def test_bad_arguments_are_rejected_naming_the_field(agent, acks, clock, daemon, action, args, field) -> None:
    await agent.deliver(signed(command("bad", action, args=args), clock))
    assert acks.statuses("bad") == ["rejected"]
    assert field in (acks.last("bad").reason or "")
    assert daemon.calls == []
    await agent.deliver(signed(command("bad", action, args=args), clock))  # judged again, not remembered
    assert acks.statuses("bad") == ["rejected", "rejected"]


async def test_unsupported_action_is_rejected(agent, acks, clock) -> None:
    await agent.deliver(signed(command("d", "drain"), clock))
    ack = acks.last("d")
    assert ack.status == "rejected"
    assert "'drain' is not supported" in (ack.reason or "") and "report_sample, set_interval" in (ack.reason or "")


async def test_an_action_outside_the_contract_is_dead_lettered_naming_the_field(agent, acks, clock, daemon) -> None:
    """``reboot`` is no action of the contract: the record fails decoding before any handler, at ``data.action``."""
    await agent.deliver(signed(command("r", "reboot"), clock))
    assert daemon.calls == [] and acks.acks == []
    assert agent.dead.fields == ["data.action"]
    assert agent.dead.reasons == ["Invalid enum value 'reboot'"]


async def test_actions_and_admissions_get_their_args_struct_never_the_wire_mapping(tmp_path, clock, acks) -> None:
    seen: list[object] = []

    async def admit(args: SetIntervalArgs) -> None:
        seen.append(args)

    async def set_interval(args: SetIntervalArgs) -> dict:
        seen.append(args)
        return {}

    agent = Agent(
        tmp_path, clock, Daemon(), acks, actions={"set_interval": set_interval}, admissions={"set_interval": admit}
    )
    await agent.deliver(signed(command("t", args={"interval_s": 3}), clock))
    await agent.close()
    assert seen == [SetIntervalArgs(interval_s=3.0)] * 2
    assert acks.statuses("t") == ["accepted", "done"]


async def test_a_failing_action_is_acked_failed_and_not_rerun(tmp_path, clock, acks) -> None:
    runs = []

    async def report_sample(_: ReportSampleArgs) -> dict:
        runs.append(1)
        raise RuntimeError("sample loop is not running")

    agent = Agent(tmp_path, clock, Daemon(), acks, actions={"report_sample": report_sample})
    await agent.deliver(signed(command("r", "report_sample"), clock))
    await agent.deliver(signed(command("r", "report_sample"), clock))
    await agent.close()
    assert runs == [1]
    assert acks.of("r")[1] == ("failed", "RuntimeError: sample loop is not running")
    assert acks.statuses("r")[2] == "duplicate"
    assert acks.last("r").original == "failed" and acks.last("r").outcome == "failed"
    assert "original status failed (RuntimeError: sample loop is not running)" in (acks.last("r").reason or "")


async def test_a_retry_while_running_is_accepted_again_and_a_stop_is_never_rerun(tmp_path, clock, acks) -> None:
    release = asyncio.Event()
    runs = []

    async def set_interval(args: SetIntervalArgs) -> dict:
        runs.append(args.interval_s)
        await release.wait()
        return {"interval_s": args.interval_s}

    agent = Agent(tmp_path, clock, Daemon(), acks, actions={"set_interval": set_interval})
    await agent.feed(signed(command("slow"), clock))  # returns while the action runs: the consumer keeps polling
    await asyncio.sleep(0)
    assert agent.executor.running == ["slow"]
    await agent.feed(signed(command("slow"), clock))
    await asyncio.sleep(0)
    # still running: "accepted" again, not the final "duplicate", so the coordinator waits for the outcome
    assert acks.statuses("slow") == ["accepted", "accepted"]
    assert "already running" in (acks.last("slow").reason or "")
    await agent.close()  # the agent stops while the action runs
    restarted = Agent(tmp_path, clock, Daemon(), acks, actions={"set_interval": set_interval})
    await restarted.deliver(signed(command("slow"), clock))
    await restarted.close()
    assert runs == [5.0]
    assert acks.last("slow").status == "duplicate" and acks.last("slow").original == "failed"
    assert "original status failed (cancelled: the agent stopped" in (acks.last("slow").reason or "")


async def test_actions_of_one_kind_run_in_order(tmp_path, clock, acks) -> None:
    gates = {1.0: asyncio.Event(), 2.0: asyncio.Event()}
    order = []

    async def set_interval(args: SetIntervalArgs) -> dict:
        await gates[args.interval_s].wait()
        order.append(args.interval_s)
        return {}

    agent = Agent(tmp_path, clock, Daemon(), acks, actions={"set_interval": set_interval})
    for cid, value in (("a", 1.0), ("b", 2.0)):
        await agent.feed(signed(command(cid, args={"interval_s": value}), clock))
    gates[2.0].set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert order == []  # b waits for a, though its own gate is open
    gates[1.0].set()
    await agent.executor.drain()
    await agent.close()
    assert order == [1.0, 2.0]


def test_an_action_outside_the_contract_is_refused_at_construction(tmp_path) -> None:
    async def reboot(_: object) -> dict:
        return {}

    with pytest.raises(ValueError, match="actions: 'reboot' is not an action of the contract; known actions: set_"):
        CommandExecutor(NODE, tmp_path, Verifier([KEY]), AckLog(), {"reboot": reboot}, SimClock())
    with pytest.raises(ValueError, match="admissions: 'reboot' is not an action of the contract"):
        CommandExecutor(NODE, tmp_path, Verifier([KEY]), AckLog(), {}, SimClock(), admissions={"reboot": reboot})
