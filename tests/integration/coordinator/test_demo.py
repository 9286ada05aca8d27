"""`make demo` (python -m coordinator.demo --down): the fault is injected, the node cordoned, the stack stopped."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.localstack import stack
from events.broker import LocalBroker
from tests.integration.coordinator.test_local_stack import _pids_mentioning

REPO = Path(__file__).resolve().parents[3]


def _table(section: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in section.splitlines() if line.startswith("node-")}


@pytest.mark.kafka
def test_demo_cordons_the_faulty_node_and_stops_cleanly(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYOLO_")}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "coordinator.demo", "--state-dir", str(tmp_path), "--down", "--timeout", "60"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out
        before = _table(out.split("== The fleet before")[1].split("== Inject")[0])
        assert {n: row[1:4] for n, row in before.items()} == {
            n: ["Ready", "ok", "4"] for n in ("node-1", "node-2", "node-3")
        }
        took = re.search(r"node-2 cordoned ([\d.]+) s after the injection, by auto:fault", out)
        assert took is not None, out
        after = _table(out.split("== The fleet after")[1].split("== What")[0])
        assert after["node-2"][1:4] == ["Ready,Cordoned", "fail", "4"]
        assert after["node-1"][1:3] == after["node-3"][1:3] == ["Ready", "ok"]
        describe = out.split("== What the coordinators know about node-2")[1].split("== The fault events")[0]
        assert "Schedulable:  no" in describe and "xid 79" in describe.lower()
        assert "ai.myolo.node.fault.v1" in out.split("== The fault events")[1]
        assert "Kafka stopped" in out.split("== Stop the stack")[1]
        assert _pids_mentioning(str(tmp_path)) == []
    finally:
        stack.stop_members(tmp_path, progress=lambda _: None)
        LocalBroker(tmp_path).clean()
        for pid in _pids_mentioning(str(tmp_path)):
            os.kill(pid, signal.SIGKILL)
