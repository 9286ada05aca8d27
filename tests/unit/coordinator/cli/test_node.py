"""`myoloctl node enroll|keys|revoke` against a leading coordinator's real API on a real port (no broker: its
state writes are recorded), run in a thread while the test's event loop serves it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer
from typer.testing import CliRunner, Result

from myolo.common.keys import Ed25519Signer, public_path
from myolo.coordinator.api.app import create_app
from myolo.coordinator.cli.auth import Token
from myolo.coordinator.cli.client import ApiClient
from myolo.coordinator.cli.main import app
from myolo.coordinator.commands.component import Commands
from myolo.coordinator.core.coordinator import Coordinator
from myolo.coordinator.core.leadership import LeaderTerm
from myolo.coordinator.fleet.component import Fleet
from myolo.coordinator.localstack.identity import agent_public_keys, enroll_nodes
from myolo.coordinator.nodes.component import Nodes
from myolo.events.envelope import new_event
from myolo.events.payloads import GpuReading, NodeSample
from tests.support.api_auth import ADMIN, security, token
from tests.support.coordinator.offline import offline_coordinator
from tests.support.coordinator.recorder import recording_producers
from tests.support.helpers import new_ed25519_key


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Coordinator, str]]:
    _, producers = recording_producers()
    coord = offline_coordinator(tmp_path, producers=producers)
    await coord.assume_term(LeaderTerm(epoch=2, instance_id="me", started=0.0))
    parts = [p for p in (c.api() for c in coord.peers) if p is not None]
    server = TestServer(create_app(coord, parts, security()))
    await server.start_server()
    yield coord, str(server.make_url("")).rstrip("/")
    await server.close()


async def myoloctl(url: str, *args: str, stdin: str | None = None) -> Result:
    runner = CliRunner()
    env = {"MYOLO_TOKEN": token(ADMIN)}
    return await asyncio.to_thread(runner.invoke, app, [*args, "--api", url], input=stdin, env=env)


def agent_key(data_dir: Path) -> Ed25519Signer:
    data_dir.mkdir(parents=True, exist_ok=True)
    return new_ed25519_key(data_dir / "node.key")


async def test_enroll_from_a_file_and_stdin_then_list_and_revoke(served, tmp_path: Path) -> None:
    coord, url = served
    a, b = agent_key(tmp_path / "a"), agent_key(tmp_path / "b")
    done = await myoloctl(
        url, "node", "enroll", "node-a", "--public-key", str(public_path(tmp_path / "a" / "node.key"))
    )
    assert done.exit_code == 0, done.output
    assert f"node/node-a key enrolled: key id {a.key_id}" in done.output and "epoch 2" in done.output
    piped = await myoloctl(url, "node", "enroll", "node-b", "--public-key", "-", stdin=b.public.pem())
    assert piped.exit_code == 0 and "node/node-b key enrolled" in piped.output, piped.output
    again = await myoloctl(url, "node", "enroll", "node-b", "-k", "-", stdin=b.public.pem())
    assert "node/node-b key unchanged" in again.output

    revoked = await myoloctl(url, "node", "revoke", "node-a")
    assert revoked.exit_code == 0 and f"node/node-a key {a.key_id} revoked" in revoked.output, revoked.output
    table = await myoloctl(url, "node", "keys")
    assert table.exit_code == 0
    rows = [line.split() for line in table.output.splitlines()[1:]]
    assert [r[:3] for r in rows] == [["node-a", a.key_id, "revoked"], ["node-b", b.key_id, "active"]]
    as_json = json.loads((await myoloctl(url, "node", "keys", "-o", "json")).output)
    assert [k["node_id"] for k in as_json["items"]] == ["node-a", "node-b"]
    assert coord.get(Nodes).key_of("node-a").revoked


async def test_a_private_key_or_a_missing_file_is_refused_before_anything_is_sent(served, tmp_path: Path) -> None:
    coord, url = served
    agent_key(tmp_path / "a")
    private = await myoloctl(url, "node", "enroll", "node-a", "--public-key", str(tmp_path / "a" / "node.key"))
    assert private.exit_code == 2 and "never its private node.key" in private.output
    missing = await myoloctl(url, "node", "enroll", "node-a", "--public-key", str(tmp_path / "nope.pub"))
    assert missing.exit_code == 2 and "cannot read it" in missing.output
    unknown = await myoloctl(url, "node", "revoke", "node-z")
    assert unknown.exit_code == 2 and "'node-z' has no enrolled key" in unknown.output
    assert coord.get(Nodes).key_records() == ()


async def test_enroll_nodes_reads_each_agents_public_key(served, tmp_path: Path) -> None:
    """What the local stack does once its agents made their keys."""
    coord, url = served
    keys = {n: agent_key(tmp_path / n) for n in ("node-1", "node-2")}
    pems = agent_public_keys({n: tmp_path / n for n in keys})
    changes = await asyncio.to_thread(enroll_nodes, ApiClient([url], token=Token(token(ADMIN), "test")), pems)
    assert changes == {"node-1": "enrolled", "node-2": "enrolled"}
    assert {r.node_id: r.key_id for r in coord.get(Nodes).key_records()} == {n: k.key_id for n, k in keys.items()}


async def test_set_interval_sends_the_signed_command_and_a_bad_value_names_its_field(served) -> None:
    coord, url = served
    fleet = coord.get(Fleet)
    sample = NodeSample(node_id="node-a", backend="sim", gpus=[GpuReading(index=0, uuid="GPU-0", name="sim")])
    fleet.view.apply(new_event(sample, "test", clock=coord.clock), coord.clock.now())
    done = await myoloctl(url, "node", "set-interval", "node-a", "2.5")
    assert done.exit_code == 0, done.output
    assert "node/node-a sample interval 2.5 s sent as command" in done.output
    sent = [i for i in coord.get(Commands).intents() if i.node_id == "node-a"]
    assert [(i.action, i.args) for i in sent] == [("set_interval", {"interval_s": 2.5})]
    bad = await myoloctl(url, "node", "set-interval", "node-a", "7200")
    assert bad.exit_code == 2 and "interval_s" in bad.output
    unknown = await myoloctl(url, "node", "set-interval", "node-zz", "5")
    assert unknown.exit_code != 0 and "node-zz" in unknown.output
