"""A real agent upgraded to a wheel of this very project and rolled back, through the real broker.

The wheel is built from a copy of the source tree whose pyproject says 4.0.1.dev0 (the code is the same: only
the version it reports differs). The agent runs as the local stack runs it ([releases] restart = "exec"): a
signed ``upgrade`` is acked done, the agent stops as on SIGTERM and re-executes itself (same pid) from
``<releases>/agent/current``, and its samples report 4.0.1.dev0; a ``rollback`` to the source tree's version
removes the link and its samples report that version again.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import uuid
from typing import Any

import pytest

import myolo as source_myolo
from myolo.events.bus import EventConsumer, EventProducer
from myolo.events.payloads import Command, CommandAck, NodeSample
from myolo.events.topics import COMMAND_ACKS, NODE_SAMPLES
from tests.support.agent.agent_proc import AgentProc
from tests.support.helpers import new_ed25519_key, wait_until
from tests.support.wheel import build_project_wheel

pytestmark = pytest.mark.kafka
NEW = "4.0.1.dev0"
OLD = source_myolo.SOURCE_VERSION


async def test_an_agent_upgrades_itself_to_a_wheel_of_this_project_and_rolls_back(
    settings, kafka, tmp_path, monkeypatch
) -> None:
    wheel = await asyncio.to_thread(build_project_wheel, tmp_path / "build", NEW)
    sha256 = hashlib.sha256(wheel.read_bytes()).hexdigest()
    key_file = tmp_path / "coordinator.key"
    key = new_ed25519_key(key_file)
    monkeypatch.setenv("MYOLO_COMMANDS_ENABLED", "true")
    monkeypatch.setenv("MYOLO_COMMANDS_KEY_FILES", f'["{key_file}.pub"]')
    monkeypatch.setenv("MYOLO_TRAINER_WARM_WORKERS", "0")  # no standby to start and retire at each restart
    releases = tmp_path / "releases"
    agent = AgentProc(
        kafka.bootstrap, gpus=1, interval_s=0.25, extra_toml=f"[releases]\ndir = '{releases}'\nrestart = 'exec'\n"
    )
    acks: list[CommandAck] = []
    versions: list[str | None] = []  # each sample's agent_version, in the node's partition order

    async def on_event(event, info) -> None:
        data = event.data
        if isinstance(data, CommandAck) and data.node_id == agent.node_id:
            acks.append(data)
        elif isinstance(data, NodeSample) and data.node_id == agent.node_id:
            versions.append(data.agent_version)

    def done(command_id: str) -> dict[str, Any] | None:
        return next((a.result for a in acks if a.command_id == command_id and a.status in ("done", "duplicate")), None)

    def cmd(command_id: str, action: str, **args: Any) -> Command:
        return Command(command_id=command_id, node_id=agent.node_id, epoch=1, action=action, args=args)

    async with (
        EventProducer(settings, source="/myolo/coordinator/it", signer=key) as leader,
        EventProducer(settings, source="/myolo/test/releases") as dlq,
    ):
        group = f"it-releases-{uuid.uuid4().hex}"
        reader = EventConsumer(settings, [COMMAND_ACKS, NODE_SAMPLES], group, on_event, dead_letters=dlq)
        reader_task = asyncio.create_task(reader.run())
        try:
            await agent.start()
            assert agent.proc is not None
            pid = agent.proc.pid
            await wait_until(lambda: versions and versions[-1] == OLD, timeout=30, what=f"samples\n{agent.log_text()}")

            await leader.send(cmd("up", "upgrade", component="agent", version=NEW, artifact=str(wheel), sha256=sha256))
            await wait_until(
                lambda: done("up") is not None, timeout=60, what=f"upgrade done; {acks}\n{agent.log_text()}"
            )
            result = done("up")
            assert result is not None
            assert (result["version"], result["previous"], result["restart"]) == (NEW, OLD, "exec")
            assert result["path"] == str(releases / "agent" / NEW)
            assert os.readlink(releases / "agent" / "current") == NEW
            await wait_until(
                lambda: versions[-1] == NEW, timeout=60, what=f"samples of {NEW}: {versions[-3:]}\n{agent.log_text()}"
            )
            assert agent.proc.poll() is None and agent.proc.pid == pid  # re-executed in place
            assert "restarting: re-executing the agent" in agent.log_text()

            await leader.send(cmd("back", "rollback", component="agent", version=OLD))
            await wait_until(lambda: done("back") is not None, timeout=60, what=f"rollback done; {acks}")
            assert done("back") == {
                "component": "agent",
                "version": OLD,
                "previous": NEW,
                "path": None,
                "restart": "exec",
            }
            assert not (releases / "agent" / "current").exists()
            await wait_until(
                lambda: versions[-1] == OLD, timeout=60, what=f"samples of {OLD} again\n{agent.log_text()}"
            )
            assert agent.proc.poll() is None

            agent.signal(signal.SIGTERM)
            assert await asyncio.to_thread(agent.proc.wait, 30) == 0, agent.log_text()
            log = agent.log_text()
        finally:
            await reader.stop()
            await asyncio.wait_for(reader_task, 30)
            await agent.cleanup()

    assert "Traceback" not in log, log
    runs = [v for i, v in enumerate(versions) if i == 0 or versions[i - 1] != v]
    assert runs == [OLD, NEW, OLD]  # the base, the upgrade, the base again
