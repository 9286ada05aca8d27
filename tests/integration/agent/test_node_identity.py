"""The node key of a real `myolo-agent run`: made at the first start (0600, its .pub beside it), it signs the
node's faults when they are made, before the spool, so a fault spooled while Kafka was unreachable and sent
after a restart verifies against the node's public key; healthy samples stay unsigned, those reporting the
failure are signed. `key show` prints that key."""

from __future__ import annotations

import asyncio
import signal
import stat

import pytest

from myolo.agent.control import StatusRequest, call
from myolo.common.keys import load_verify_key
from myolo.events.payloads import NodeFault
from myolo.events.signing import SIG, verify_with
from myolo.events.topics import NODE_FAULTS, NODE_SAMPLES
from tests.support.agent.agent_proc import AgentProc, read_topic
from tests.support.helpers import refused_port, wait_until

pytestmark = pytest.mark.kafka


async def test_a_fault_spooled_while_kafka_was_away_verifies_when_sent_later(kafka, settings) -> None:
    with refused_port() as port:
        agent = AgentProc(f"127.0.0.1:{port}", gpus=2)
    try:
        await agent.start()
        key_file, pub = agent.dir / "node.key", agent.dir / "node.key.pub"
        await wait_until(lambda: pub.exists(), timeout=60, what=f"the node key\n{agent.log_text()}")
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        public = load_verify_key(pub, "node.key.pub")
        await wait_until(lambda: agent.cli("status").returncode == 0, timeout=60, what="the control socket")
        out = await asyncio.to_thread(agent.cli, "inject", "--gpu", "1", "--xid", "79")
        assert out.returncode == 0, out.stderr
        await wait_until(lambda: "fault published" in agent.log_text(), timeout=30, what="the fault spooled")
        # and a sample reporting the failure spooled after it (the agent's status is its latest sample's health)
        await wait_until(
            lambda: call(agent.socket, StatusRequest()).data["status"] == "fail", timeout=30, what="a fail sample"
        )
        agent.signal(signal.SIGTERM)
        assert await asyncio.to_thread(agent.proc.wait, 60) == 0, agent.log_text()

        shown = await asyncio.to_thread(agent.cli_config, "key", "show", "--pem")
        assert shown.returncode == 0 and shown.stdout.strip() == pub.read_text().strip(), shown.stderr
        shown = await asyncio.to_thread(agent.cli_config, "key", "show")
        assert f"node id:  {agent.node_id}" in shown.stdout and f"key id:   {public.key_id}" in shown.stdout

        agent.config.write_text(agent.config.read_text().replace(f"127.0.0.1:{port}", kafka.bootstrap))
        await agent.start()  # same data dir: the same key, and the spooled fault goes out now

        async def xid_faults() -> list:
            return [e for e in await read_topic(settings, NODE_FAULTS, agent.node_id) if e.data.kind == "xid"]

        await wait_until(xid_faults, timeout=90, what=f"the spooled fault on Kafka\n{agent.log_text()}", every=0.5)
        assert load_verify_key(pub, "node.key.pub").key_id == public.key_id  # not regenerated
        faults = await read_topic(settings, NODE_FAULTS, agent.node_id)
        assert faults and all(isinstance(e.data, NodeFault) for e in faults)
        for event in faults:  # the xid fault and the health faults it caused
            verify_with(event, public, "fault")
        samples = await read_topic(settings, NODE_SAMPLES, agent.node_id)
        healthy = [e for e in samples if e.data.health == "ok"]
        assert healthy and all(SIG not in e.extensions for e in healthy)  # telemetry is not signed
        failing = [e for e in samples if e.data.health != "ok"]  # after the XID: these could cordon the node
        assert failing, [e.data.health for e in samples]
        for event in failing:
            verify_with(event, public, "sample")
    finally:
        await agent.cleanup()
