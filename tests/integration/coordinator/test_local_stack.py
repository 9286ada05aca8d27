"""`myoloctl local up --nodes 2 --gpus 2 --coordinators 2`: real Kafka, coordinators and agents as processes.

One test walks the whole life of a stack (up, get, status, Debian's Prometheus scraping it, cordon through a
standby, a killed leader and node, down) because starting it is the expensive part. Waits poll a condition with a deadline; nothing sleeps blindly.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from myolo.agent.metrics.plan import GPU_LABELS
from myolo.coordinator.localstack import prometheus as local_prometheus
from myolo.coordinator.localstack import stack
from myolo.coordinator.localstack.broker import LocalBroker, state
from tests.support.helpers import pids_mentioning, poll_until
from tests.support.prometheus import Prometheus, check_metrics, prometheus


def _until(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    return poll_until(what, check, timeout)


@pytest.mark.kafka
def test_local_stack_up_get_status_failover_down(tmp_path: Path, local_myoloctl) -> None:
    myoloctl = local_myoloctl
    cleanup = contextlib.ExitStack()
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

        # Debian's Prometheus scrapes the stack through the targets `local up` wrote (every second here)
        files = local_prometheus.write_config(tmp_path, interval_s=1.0)
        prom = cleanup.enter_context(prometheus(files.config, tmp_path / "prometheus-data"))
        _until("every agent and coordinator scraped", lambda: _all_up(prom, 4), timeout=60)
        _check_scraped_gpus(prom, gpus)
        _check_pages(records, files.token.read_text().strip())

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

        # a node killed (its launcher, and the agent with it) stops being up, as does the killed leader
        node2 = records["node-2"].info["health_url"].split("//", 1)[1]
        os.kill(records["node-2"].pid, signal.SIGKILL)
        health = _until("node-2 and the old leader down", lambda: _down(prom, {node2, _netloc(records[leader])}))
        assert health[_netloc(records["node-1"])] == "up"
        cleanup.close()  # Prometheus stops before the stack: nothing of the test may outlive `local down`

        down = myoloctl("local", "down")
        assert down.exit_code == 0, down.output
        assert f"coordinator {leader} was not running" in down.output
        assert "agent node-1 stopped" in down.output and "Kafka stopped" in down.output
        assert "agent node-2 was not running" in down.output
        assert (
            down.output.index("agent node-1") < down.output.index(f"coordinator {standby}") < down.output.index("Kafka")
        )
        assert pids_mentioning(str(tmp_path)) == []
        assert state.load(tmp_path).processes == []
    finally:
        cleanup.close()
        stack.stop_members(tmp_path, progress=lambda _: None)
        LocalBroker(tmp_path).clean()
        for pid in pids_mentioning(str(tmp_path)):
            os.kill(pid, signal.SIGKILL)


def _health(record: state.ProcessRecord) -> str:
    from myolo.coordinator.localstack.health import coordinator_health

    return coordinator_health(record.info["api_url"])


def _cordoned(myoloctl, record: state.ProcessRecord, node: str) -> bool:
    body = json.loads(myoloctl("get", "nodes", "-o", "json", "--api", record.info["api_url"]).output)
    return next(n for n in body["items"] if n["node_id"] == node)["cordoned"]


def _netloc(record: state.ProcessRecord) -> str:
    return (record.info.get("api_url") or record.info["health_url"]).split("//", 1)[1]


def _health_of(prom: Prometheus) -> dict[str, str]:
    return {t["labels"]["instance"]: t["health"] for t in prom.targets()}


def _all_up(prom: Prometheus, count: int) -> bool:
    health = _health_of(prom)
    return len(health) == count and set(health.values()) == {"up"}


def _down(prom: Prometheus, instances: set[str]) -> dict[str, str] | None:
    health = _health_of(prom)
    return health if all(health.get(i) == "down" for i in instances) else None


def _check_scraped_gpus(prom: Prometheus, gpus: list[dict]) -> None:
    """One DCGM_FI_DEV_GPU_UTIL series per simulated GPU, with dcgm-exporter's labels; the scraped values are
    the samples' (compared on the fields a simulated GPU holds steady: its power limit and memory size,
    whole or as free + used + reserved; its utilisation moves every second, so it is checked to be a
    percentage)."""
    by_uuid = {g["uuid"]: g for g in gpus}
    util = prom.query("DCGM_FI_DEV_GPU_UTIL")
    assert len(util) == 4
    for series in util:
        labels = series["metric"]
        assert set(GPU_LABELS) | {"__name__", "instance", "job"} == set(labels)
        g = by_uuid[labels["UUID"]]
        assert (labels["node"], labels["gpu"], labels["device"]) == (
            g["node_id"],
            str(g["index"]),
            f"nvidia{g['index']}",
        )
        assert labels["job"] == "myolo-agent" and labels["modelName"] == g["name"]
        assert 0.0 <= float(series["value"][1]) <= 100.0
    for metric, field, scale in (
        ("myolo_gpu_power_limit_watts", "power_limit_w", 1),
        ("myolo_gpu_memory_limit_bytes", "mem_total_bytes", 1),
        ("DCGM_FI_DEV_FB_FREE + DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_RESERVED", "mem_total_bytes", 2**20),
    ):
        scraped = {s["metric"]["UUID"]: float(s["value"][1]) * scale for s in prom.query(metric)}
        assert scraped == {u: float(g[field]) for u, g in by_uuid.items()}, metric
    leader = prom.query("sum(myolo_coordinator_leader)")
    assert float(leader[0]["value"][1]) == 1.0


_DCGM_FINDINGS = (
    re.compile(r'^DCGM_\w+ counter metrics should have "_total" suffix$'),
    re.compile(r"^DCGM_FI_DEV_PCIE_REPLAY_COUNTER metric name should not include type 'counter'$"),
    re.compile(r"^(DCGM_\w+|myolo_gpu_\w+) label names should be written in 'snake_case' not 'camelCase'$"),
)


def _check_pages(records: dict[str, state.ProcessRecord], scrape_token: str) -> None:
    """``promtool check metrics``: on an agent's page only what dcgm-exporter's own names imply (its counters
    have no ``_total``, ``modelName`` is camelCase, on every GPU series); nothing on a coordinator's."""
    with urllib.request.urlopen(f"{records['node-1'].info['health_url']}/metrics", timeout=5) as resp:
        findings = check_metrics(resp.read().decode())
    assert findings and all(any(p.match(f) for p in _DCGM_FINDINGS) for f in findings), findings
    request = urllib.request.Request(
        f"{records['coordinator-1'].info['api_url']}/metrics", headers={"Authorization": f"Bearer {scrape_token}"}
    )
    with urllib.request.urlopen(request, timeout=5) as resp:
        assert check_metrics(resp.read().decode()) == []
