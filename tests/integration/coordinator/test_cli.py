"""`myoloctl get/describe/cordon/uncordon` against real coordinator APIs (in-memory fleets on real ports)."""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from collections.abc import Iterator

import pytest
import yaml
from typer.testing import CliRunner

from myolo.coordinator.api.app import serve
from myolo.coordinator.cli.main import app
from tests.support.api_auth import OPERATOR, VIEWER, security, token
from tests.support.coordinator.api_fleet import MemoryFleet, node, parts_for, sick_node
from tests.support.helpers import refused_port
from tests.support.tls_certs import Certs, make_certs


class ApiThread:
    """One coordinator API served from its own event loop in a thread, like a separate process would."""

    def __init__(self, fleet: MemoryFleet, tls: Certs | None = None) -> None:
        self.fleet = fleet
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        ctx = None
        if tls is not None:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(tls.cert, tls.key)
        sec = security(clock=fleet.clock, instance_id=fleet.instance_id)
        served = serve(fleet, parts_for(fleet), sec, port=0, ssl_context=ctx)
        self.runner, port = asyncio.run_coroutine_threadsafe(served, self.loop).result(10)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def apis() -> Iterator[tuple[ApiThread, ApiThread]]:
    """A leader and a standby that knows the leader's URL, both with the same three nodes."""
    leader_fleet = MemoryFleet("coord-1")
    leader = ApiThread(leader_fleet)
    standby_fleet = MemoryFleet("coord-2", leader=False, leader_url=leader.url)
    standby = ApiThread(standby_fleet)
    for fleet in (leader_fleet, standby_fleet):
        now = fleet.now()
        fleet.add(node("node-1", now, gpus=2))
        fleet.add(node("node-2", now, gpus=2))
        fleet.add(sick_node("node-3", now))
    try:
        yield leader, standby
    finally:
        standby.close()
        leader.close()


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, list(args), env={"MYOLO_API": "", "MYOLO_TOKEN": token(OPERATOR), **(env or {})})


def test_get_nodes_table_is_plain_when_piped(apis) -> None:
    _, standby = apis
    result = run("get", "nodes", "--api", standby.url)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:4] == ["NAME", "STATUS", "HEALTH", "GPUS"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["node-1"][1:4] == ["Ready", "ok", "2"]
    assert rows["node-3"][1:3] == ["Ready,Cordoned", "fail"]
    assert "cordoned: xid 79 on GPU 1" in lines[3]
    assert "\x1b[" not in result.output and "─" not in result.output


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_get_nodes_as_data_is_the_api_answer(apis, fmt: str) -> None:
    leader, _ = apis
    result = run("get", "nodes", "-o", fmt, "--api", leader.url)
    assert result.exit_code == 0, result.output
    body = json.loads(result.output) if fmt == "json" else yaml.safe_load(result.output)
    assert [n["node_id"] for n in body["items"]] == ["node-1", "node-2", "node-3"]
    assert body["items"][2]["cordon"]["by"] == "auto:fault"


def test_get_gpus(apis) -> None:
    leader, _ = apis
    result = run("get", "gpus", "--api", leader.url)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["NODE", "GPU", "NAME", "UTIL", "MEMORY", "TEMP", "POWER", "HEALTH", "REASONS"]
    assert len(lines) == 1 + 6
    failed = [line for line in lines if " fail " in line]
    assert len(failed) == 1 and failed[0].startswith("node-3") and "XID 79" in failed[0]


def test_watch_prints_a_snapshot_per_refresh_and_follows_changes(apis) -> None:
    leader, _ = apis
    result = run("get", "nodes", "-o", "json", "--watch", "--interval", "0.1", "--count", "3", "--api", leader.url)
    assert result.exit_code == 0, result.output
    docs = [json.loads(line) for line in result.output.splitlines()]
    assert len(docs) == 3 and all(len(d["items"]) == 3 for d in docs)
    table = run("get", "gpus", "--watch", "--interval", "0.1", "--count", "2", "--api", leader.url)
    assert table.exit_code == 0 and table.output.count("NODE ") == 2


def test_reads_fall_through_to_the_next_coordinator(apis) -> None:
    _, standby = apis
    with refused_port() as dead:
        result = run("get", "nodes", "-o", "json", "--api", f"http://127.0.0.1:{dead},{standby.url}")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)["items"]) == 3


def test_describe_node_shows_gpus_faults_nccl_and_leaks(apis) -> None:
    _, standby = apis
    result = run("describe", "node", "node-3", "--api", standby.url)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Name:         node-3" in out
    assert "Ready,Cordoned" in out and "Health:       fail" in out and "gpu 1: XID 79" in out
    assert "cordoned 2.0s ago by auto:fault (epoch 0): xid 79 on GPU 1" in out
    assert "Schedulable:  no" in out and "sim (simulated GPUs)" in out
    faults = out.split("Recent faults")[1].splitlines()
    assert faults[1].split()[:5] == ["AGE", "KIND", "HEALTH", "GPU", "XID"]
    assert faults[2].split()[:5] == ["2.0s", "xid", "fail", "1", "79"]
    assert "P2P/NVLink,NET/IB/GDRDMA" in out and "2.21.5" in out and "0/16" in out
    leak = out.split("Memory leak trend")[1].splitlines()[2].split()
    assert leak[:4] == ["gpu", "0", "+0.420%/h", "+0.350..+0.500"] and leak[-1] == "LEAK"


def test_describe_unknown_node_exits_2_with_a_hint(apis) -> None:
    leader, _ = apis
    result = run("describe", "node", "nope", "--api", leader.url)
    assert result.exit_code == 2
    assert "node 'nope' is not known (id)" in result.output and "hint: list the nodes" in result.output


def test_cordon_via_the_standby_lands_on_the_leader(apis) -> None:
    leader, standby = apis
    result = run("cordon", "node-1", "--reason", "fan noise", "--api", standby.url)
    assert result.exit_code == 0, result.output
    assert "node/node-1 cordoned: fan noise" in result.output
    assert f"(epoch 3) via {leader.url}" in result.output
    assert [(w.node_id, w.cordoned, w.reason) for w in leader.fleet.writes] == [("node-1", True, "fan noise")]
    assert leader.fleet.writes[0].by == f"operator:{OPERATOR}"  # the token's name, across the redirect
    assert standby.fleet.writes == []

    back = run("uncordon", "node-1", "--api", standby.url)
    assert back.exit_code == 0, back.output
    assert "node/node-1 uncordoned: uncordoned by operator" in back.output
    listed = json.loads(run("get", "nodes", "-o", "json", "--api", leader.url).output)
    assert listed["items"][0]["cordoned"] is False and listed["items"][0]["schedulable"] is True


def test_without_a_good_token_or_role_myoloctl_says_why(apis, tmp_path, monkeypatch) -> None:
    leader, _ = apis
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    none = run("get", "nodes", "--api", leader.url, env={"MYOLO_TOKEN": ""})
    assert none.exit_code == 1 and "not authenticated: no token to send" in none.output
    assert "MYOLO_TOKEN" in none.output and str(tmp_path / "myolo" / "token") in none.output
    bad = run("get", "nodes", "--api", leader.url, env={"MYOLO_TOKEN": "myolo_not-a-token"})
    assert bad.exit_code == 1 and "the token from MYOLO_TOKEN was refused" in bad.output
    viewer = run("cordon", "node-1", "--api", leader.url, env={"MYOLO_TOKEN": token(VIEWER)})
    assert viewer.exit_code == 1 and "not allowed" in viewer.output and "needs the operator role" in viewer.output
    assert leader.fleet.writes == []


def test_the_token_file_is_read_and_refused_when_others_can_read_it(apis, tmp_path, monkeypatch) -> None:
    leader, _ = apis
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    path = tmp_path / "myolo" / "token"
    path.parent.mkdir()
    path.write_text(token(VIEWER) + "\n")
    path.chmod(0o644)
    loose = run("get", "nodes", "--api", leader.url, env={"MYOLO_TOKEN": ""})
    assert loose.exit_code == 2 and f"chmod 600 {path}" in loose.output
    path.chmod(0o600)
    ok = run("get", "nodes", "-o", "json", "--api", leader.url, env={"MYOLO_TOKEN": ""})
    assert ok.exit_code == 0 and len(json.loads(ok.output)["items"]) == 3


def test_cordon_errors_name_the_problem(apis) -> None:
    leader, _ = apis
    unknown = run("cordon", "ghost", "--api", leader.url)
    assert unknown.exit_code == 2 and "node 'ghost' is not known" in unknown.output
    too_long = run("cordon", "node-1", "--reason", "x" * 501, "--api", leader.url)
    assert too_long.exit_code == 2 and "(reason)" in too_long.output and "length" in too_long.output
    assert leader.fleet.writes == []


def test_no_api_anywhere_says_how_to_get_one(tmp_path) -> None:
    result = run("get", "nodes", env={"MYOLO_STATE_DIR": str(tmp_path)})
    assert result.exit_code == 1
    assert "no local stack coordinator is running" in result.output and "myoloctl local up" in result.output
    bad = run("get", "nodes", "--api", "10.0.0.1:8480")
    assert bad.exit_code == 2 and "is not an http(s) URL" in bad.output
    with refused_port() as port:
        down = run("get", "nodes", "--api", f"http://127.0.0.1:{port}")
    assert down.exit_code == 1 and "no coordinator API answered" in down.output


def test_an_https_api_is_trusted_through_ca_file_and_refused_without_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    fleet = MemoryFleet("coord-tls")
    fleet.add(node("node-1", fleet.now(), gpus=1))
    api = ApiThread(fleet, make_certs(tmp_path / "tls"))
    try:
        trusted = run("--ca-file", str(tmp_path / "tls" / "ca.pem"), "get", "nodes", "-o", "json", "--api", api.url)
        assert trusted.exit_code == 0, trusted.output
        assert [n["node_id"] for n in json.loads(trusted.output)["items"]] == ["node-1"]
        by_env = run("cordon", "node-1", "--api", api.url, env={"MYOLO_CA_FILE": str(tmp_path / "tls" / "ca.pem")})
        assert by_env.exit_code == 0 and fleet.writes[0].by == f"operator:{OPERATOR}"
        untrusted = run("get", "nodes", "--api", api.url)
        assert untrusted.exit_code == 1
        assert "TLS certificate is not trusted" in untrusted.output and "--ca-file" in untrusted.output
        other = make_certs(tmp_path / "other", cn="another CA")
        wrong = run("--ca-file", str(other.ca), "get", "nodes", "--api", api.url)
        assert wrong.exit_code == 1 and "not trusted" in wrong.output
        missing = run("--ca-file", str(tmp_path / "nope.pem"), "get", "nodes", "--api", api.url)
        assert missing.exit_code == 2 and "no such file" in missing.output
    finally:
        api.close()
