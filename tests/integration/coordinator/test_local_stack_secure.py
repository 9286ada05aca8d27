"""`myoloctl local up --secure`: each process of the stack is its own Kafka user with its role's ACLs only.

One agent and one coordinator on a secured broker: the fleet works (the node is Ready, its samples flow), each
member's config names its own user and private password file, and the credentials a node holds are refused
where its role may not write. `myoloctl events` find the security in the state file.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import tomllib
from pathlib import Path

import pytest
from aiokafka.errors import TopicAuthorizationFailedError

from myolo.coordinator.cordons.records import STATE_NODES
from myolo.coordinator.localstack import stack
from myolo.coordinator.localstack.broker import LocalBroker, state
from myolo.events import topics as t
from myolo.events.bus import EventProducer
from myolo.events.settings import KafkaSettings
from tests.support.helpers import pids_mentioning


async def _write(settings: KafkaSettings, topic: str) -> None:
    async with EventProducer(settings, source="test/stolen-credentials") as producer:
        await asyncio.wait_for(producer.send_raw(topic, b"{}", b"node-1", []), 30)


@pytest.mark.kafka
def test_secure_stack_gives_each_member_its_own_user_and_only_its_roles_rights(tmp_path: Path, local_myoloctl) -> None:
    myoloctl = local_myoloctl
    try:
        up = myoloctl("local", "up", "--secure", "--nodes", "1", "--gpus", "1", "--timeout", "90")
        assert up.exit_code == 0, up.output
        assert "security: SASL_SSL SCRAM-SHA-512" in up.output and "stack ready" in up.output
        sec = state.load(tmp_path).security
        assert sec is not None and {n: u.role for n, u in sec.users.items()} == {
            "admin": "admin",
            "operator": "operator",
            "producer": "producer",
            "coordinator-1": "coordinator",
            "node-1": "agent",
        }
        for role, name in (("agents", "node-1"), ("coordinators", "coordinator-1")):
            kafka = tomllib.loads((tmp_path / role / name / f"{role[:-1]}.toml").read_text())["kafka"]
            assert kafka["sasl_username"] == name and kafka["security_protocol"] == "SASL_SSL"
            assert oct(Path(kafka["sasl_password_file"]).stat().st_mode & 0o777) == "0o600"
            assert "sasl_password" not in kafka  # the password itself is in no config

        status = myoloctl("local", "status")
        assert status.exit_code == 0 and "SASL_SSL with ACLs" in status.output, status.output
        # the operator reads what the agent published (so the agent's own user writes its samples)
        tail = myoloctl("events", "tail", t.NODE_SAMPLES, "--from-beginning", "-n", "1", "-o", "json")
        assert tail.exit_code == 0, tail.output
        assert json.loads(tail.output.splitlines()[-1])["key"] == "node-1"

        # what a node's credentials cannot do, whoever holds them
        node = sec.client_fields("node-1")
        stolen = KafkaSettings(bootstrap=state.load(tmp_path).bootstrap or "", client_id="stolen", **node)
        for topic in (t.COMMANDS, STATE_NODES):
            with pytest.raises(TopicAuthorizationFailedError):
                asyncio.run(_write(stolen, topic))

        down = myoloctl("local", "down", "--clean")  # nothing of the stack's secrets is left behind
        assert down.exit_code == 0, down.output
        assert [p.name for p in tmp_path.iterdir() if p.name in ("api", "agents", "signing.key", "kafka")] == []
    finally:
        stack.stop_members(tmp_path, progress=lambda _: None)
        LocalBroker(tmp_path).clean()
        for pid in pids_mentioning(str(tmp_path)):
            os.kill(pid, signal.SIGKILL)
