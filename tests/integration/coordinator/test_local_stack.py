"""`myoloctl local up --nodes 2 --gpus 2 --coordinators 2`: real Kafka, coordinators and agents as processes.

One test walks the whole life of a stack (up, get, status, cordon through a standby, a killed leader, down)
because starting it is the expensive part. Waits poll a condition with a deadline; nothing sleeps blindly.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from coordinator.localstack import stack
from coordinator.localstack.broker import LocalBroker, state
from tests.support.helpers import pids_mentioning, poll_until


def _until(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    return poll_until(what, check, timeout)


@pytest.mark.kafka
def test_local_stack_up_get_status_failover_down(tmp_path: Path, local_myoloctl) -> None:
    myoloctl = local_myoloctl
    try:
        up = myoloctl("local", "up", "--nodes", "2", "--gpus", "2", "--coordinators", "2", "--timeout", "60")
        assert up.exit_code == 0, up.output
        assert "stack ready: 2 coordinator(s), 2 node(s)" in up.output
        assert "enrolled the node keys of node-1, node-2" in up.output  # their faults and acks are taken
        assert f"API token: {tmp_path / 'api' / 'admin.token'}" in up.output
        records = {p.name: p for p in state.load(tmp_path).processes}
        assert set(records) == {"kafka", "coordinator-1", "coordinator-2", "node-1", "node-2"}
        # each member bound port 0: the port the kernel gave it is recorded, with its URL
        for name in ("coordinator-1", "coordinator-2"):
            assert records[name].info["api_url"] == f"http://127.0.0.1:{records[name].ports['api']}"
        for name in ("node-1", "node-2"):
            assert records[name].info["health_url"] == f"http://127.0.0.1:{records[name].ports['health']}"
        assert 0 not in [port for r in records.values() for port in r.ports.values()]
        assert oct((tmp_path / "signing.key").stat().st_mode & 0o777) == "0o600"
        for name in ("node-1", "node-2"):
            assert "simulate_gpus = 2" in (tmp_path / "agents" / name / "agent.toml").read_text()
        for name in ("coordinator-1", "coordinator-2"):
            assert str(tmp_path / "signing.key") in (tmp_path / "coordinators" / name / "coordinator.toml").read_text()

        nodes = myoloctl("get", "nodes")
        assert nodes.exit_code == 0, nodes.output
        rows = [line.split() for line in nodes.output.splitlines()[1:]]
        assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
            ("node-1", "Ready", "ok", "2"),
            ("node-2", "Ready", "ok", "2"),
        ]
        gpus = json.loads(myoloctl("get", "gpus", "-o", "json").output)["items"]
        assert [(g["node_id"], g["index"]) for g in gpus] == [
            ("node-1", 0),
            ("node-1", 1),
            ("node-2", 0),
            ("node-2", 1),
        ]

        status = myoloctl("local", "status")
        assert status.exit_code == 0, status.output
        assert "Kafka running" in status.output
        table = {
            line.split()[0]: line.split() for line in status.output.splitlines() if line.startswith(("coord", "node"))
        }
        assert {name: row[2] for name, row in table.items()} == {n: str(records[n].pid) for n in table}
        assert sorted(row[4] for name, row in table.items() if name.startswith("coord")) == ["leader", "standby"]
        assert [table[n][3:5] for n in ("node-1", "node-2")] == [["running", "ok"], ["running", "ok"]]

        # a write sent to the standby is redirected to the leader
        leader = next(n for n, row in table.items() if row[4] == "leader")
        standby = next(n for n, row in table.items() if row[4] == "standby")
        cordon = myoloctl("cordon", "node-2", "--reason", "bench test", "--api", records[standby].info["api_url"])
        assert cordon.exit_code == 0, cordon.output
        assert f"via {records[leader].info['api_url']}" in cordon.output
        assert "recorded by operator:local-admin" in cordon.output  # the stack's own token, found by myoloctl
        _until("the standby to see the cordon", lambda: _cordoned(myoloctl, records[standby], "node-2"))

        # kill -9 the leader: reads fall through to the standby, which takes over the writes
        os.kill(records[leader].pid, signal.SIGKILL)
        _until("the standby to lead", lambda: "leader" in _health(records[standby]), timeout=30)
        again = myoloctl("uncordon", "node-2")
        assert again.exit_code == 0, again.output
        assert f"via {records[standby].info['api_url']}" in again.output
        assert not _cordoned(myoloctl, records[standby], "node-2")
        dead = myoloctl("local", "status")
        assert dead.exit_code == 1 and "exited" in dead.output

        down = myoloctl("local", "down")
        assert down.exit_code == 0, down.output
        assert f"coordinator {leader} was not running" in down.output
        assert "agent node-1 stopped" in down.output and "Kafka stopped" in down.output
        assert (
            down.output.index("agent node-1") < down.output.index(f"coordinator {standby}") < down.output.index("Kafka")
        )
        assert pids_mentioning(str(tmp_path)) == []
        assert state.load(tmp_path).processes == []
    finally:
        stack.stop_members(tmp_path, progress=lambda _: None)
        LocalBroker(tmp_path).clean()
        for pid in pids_mentioning(str(tmp_path)):
            os.kill(pid, signal.SIGKILL)


def _health(record: state.ProcessRecord) -> str:
    from coordinator.localstack.health import coordinator_health

    return coordinator_health(record.info["api_url"])


def _cordoned(myoloctl, record: state.ProcessRecord, node: str) -> bool:
    body = json.loads(myoloctl("get", "nodes", "-o", "json", "--api", record.info["api_url"]).output)
    return next(n for n in body["items"] if n["node_id"] == node)["cordoned"]
