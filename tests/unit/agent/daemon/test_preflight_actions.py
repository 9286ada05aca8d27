"""The running agent answers the new pre-flight commands through its executor: check_tfrecords reads files
(in a thread), runtime_versions asks the trainer's interpreter, rdma_latency says when ib_write_lat is missing."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from myolo.agent.tfrecord.check import frame
from myolo.events.payloads.commands import CheckTfrecordsResult, RdmaLatencyResult, RuntimeVersions, action_result
from tests.unit.agent.daemon.test_commands import Node
from tests.unit.agent.daemon.test_trainer import final

pytestmark = pytest.mark.usefixtures("stop_nodes")


async def test_the_agent_answers_each_preflight_action(short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = short_dir / "train.tfrecord"
    data.write_bytes(b"".join(frame(b"record %d" % i) for i in range(5)))
    python = short_dir / "python"
    python.write_text('#!/bin/sh\necho \'{"torch": "2.4.0", "cuda": "12.4", "cudnn": "9.1.0"}\'\n')
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no ib_write_lat there
    node = Node(short_dir, toml=f"[trainer]\npython = ['{python}']\n")
    await node.start()

    await node.send("t1", "check_tfrecords", paths=[str(data)])
    ack = await final(node, "t1")
    checked: CheckTfrecordsResult = action_result("check_tfrecords", ack.result)
    assert ack.status == "done" and checked[str(data)].files[0].records == 5

    await node.send("v1", "runtime_versions", timeout_s=30)
    ack = await final(node, "v1")
    versions: RuntimeVersions = action_result("runtime_versions", ack.result)
    assert (versions.torch, versions.cuda, versions.simulated, versions.error) == ("2.4.0", "12.4", True, None)
    assert versions.driver == node.backend.driver_version()

    await node.send("r1", "rdma_latency", role="server", timeout_s=5)
    ack = await final(node, "r1")
    rdma: RdmaLatencyResult = action_result("rdma_latency", ack.result)
    assert ack.status == "done" and not rdma.available and "ib_write_lat is not installed" in (rdma.reason or "")
    await node.stop()
