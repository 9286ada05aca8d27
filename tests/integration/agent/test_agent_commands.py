"""A real `myolo-agent run` process (2 simulated GPUs) obeying signed commands from the real broker.

Commands are enabled the way `myoloctl local up` does it (MYOLO_COMMANDS_ENABLED, MYOLO_COMMANDS_KEY_FILES);
a coordinator-like producer signs commands with the same key file. Checked: set_interval and report_sample
are acked done on myolo.command.acks and change what the agent publishes, a command from an older epoch
after a newer one is rejected, a retried command id runs once, drain shows in /healthz, SIGTERM exits 0.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from typing import Any

import pytest

from myolo.events.bus import EventConsumer, EventProducer
from myolo.events.payloads import Command, CommandAck, NodeSample
from myolo.events.topics import COMMAND_ACKS, NODE_SAMPLES
from tests.support.agent.agent_proc import AgentProc, read_topic
from tests.support.helpers import new_ed25519_key, wait_until

pytestmark = pytest.mark.kafka


async def test_a_running_agent_obeys_signed_commands_once_and_fences_an_older_epoch(
    settings, kafka, tmp_path, monkeypatch
) -> None:
    key_file = tmp_path / "coordinator.key"
    key = new_ed25519_key(key_file)
    monkeypatch.setenv("MYOLO_COMMANDS_ENABLED", "true")
    monkeypatch.setenv("MYOLO_COMMANDS_KEY_FILES", f'["{key_file}.pub"]')  # the agent trusts the public half
    agent = AgentProc(kafka.bootstrap, gpus=2, interval_s=0.5)
    acks: list[CommandAck] = []

    async def on_ack(event, info) -> None:
        if isinstance(event.data, CommandAck) and event.data.node_id == agent.node_id:
            acks.append(event.data)

    def statuses(command_id: str) -> list[str]:
        return [a.status for a in acks if a.command_id == command_id]

    def result(command_id: str, status: str) -> dict[str, Any]:
        return next(a.result for a in acks if a.command_id == command_id and a.status == status)

    def cmd(command_id: str, action: str, epoch: int, **args: Any) -> Command:
        return Command(command_id=command_id, node_id=agent.node_id, epoch=epoch, action=action, args=args)

    async with (
        EventProducer(settings, source="/myolo/coordinator/it", signer=key) as leader,
        EventProducer(settings, source="/myolo/test/acks") as dlq,
    ):
        reader = EventConsumer(settings, [COMMAND_ACKS], f"it-acks-{uuid.uuid4().hex}", on_ack, dead_letters=dlq)
        reader_task = asyncio.create_task(reader.run())
        try:
            await agent.start()
            await wait_until(lambda: "READY" in agent.kinds(), timeout=30, what=f"READY=1\n{agent.log_text()}")
            _, body = await asyncio.to_thread(agent.health)
            assert body["checks"]["commands"]["status"] == "ok", body

            await leader.send(cmd("s1", "set_interval", 5, interval_s=0.25))
            await leader.send(cmd("r1", "report_sample", 5))
            await wait_until(
                lambda: statuses("s1") == ["accepted", "done"] and statuses("r1") == ["accepted", "done"],
                timeout=30,
                what=f"set_interval and report_sample acked done; acks {acks}\n{agent.log_text()}",
            )
            assert result("s1", "done") == {"interval_s": 0.25, "previous_s": 0.5}
            first = result("r1", "done")
            assert first["gpus"] == 2 and first["seq"] >= 1

            await leader.send(cmd("stale", "set_interval", 3, interval_s=9.0))  # the old leader's epoch
            await leader.send(cmd("r1", "report_sample", 5))  # a retry: a new event with the same command id
            await leader.send(cmd("d1", "drain", 5, reason="auto:fault"))
            await wait_until(
                lambda: statuses("stale") == ["rejected"] and len(statuses("r1")) == 3 and "done" in statuses("d1"),
                timeout=30,
                what=f"stale, duplicate and drain acks; acks {acks}",
            )
            stale = next(a for a in acks if a.command_id == "stale")
            assert "stale epoch" in (stale.reason or "") and stale.result == {"seen_epoch": 5}
            assert statuses("r1") == ["accepted", "done", "duplicate"]
            assert result("r1", "duplicate") == first  # the original outcome, not a second sample
            code, body = await asyncio.to_thread(agent.health)
            assert code == 200 and body["status"] == "warn", body
            assert body["checks"]["commands"]["data"]["draining"] is True
            assert body["checks"]["commands"]["data"]["epoch"] == 5

            agent.signal(signal.SIGTERM)
            assert await asyncio.to_thread(agent.proc.wait, 20) == 0, agent.log_text()
            log = agent.log_text()
        finally:
            await reader.stop()
            await asyncio.wait_for(reader_task, 30)
            await agent.cleanup()

    samples = [e.data for e in await read_topic(settings, NODE_SAMPLES, agent.node_id)]
    assert all(isinstance(s, NodeSample) for s in samples)
    intervals = [s.interval_s for s in samples]
    assert 0.25 in intervals and 9.0 not in intervals  # the command applied; the fenced one did not
    assert intervals[: intervals.index(0.25)] == [0.5] * intervals.index(0.25)
    seqs = sorted({s.seq for s in samples})
    assert first["seq"] in seqs
    assert "Traceback" not in log, log
