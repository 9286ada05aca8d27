"""`myoloctl preflight` end to end: the local stack (real Kafka, a coordinator, two agents with a simulated GPU
each), a real elastic job whose manifest records its data file's SHA-256 (its rank 0 checks it at start), and
the agents hashing the file on the leader's signed hash_files commands.

The file first matches (exit 0, every check PASS or, for the checks the local stack cannot answer, SKIP with
its reason: the cuda, tfrecord and rdma rows); then it is replaced by other bytes (the running workers keep
the old inode), and the same command exits 1 naming each node and the file. The bandwidth probe is left out
(--skip nccl): it starts torch ranks on each node, which the unit tests cover with the agents' real answers.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from myolo.coordinator.localstack import stack
from myolo.coordinator.localstack.broker import LocalBroker
from tests.support.helpers import pids_mentioning, poll_until

MANIFEST = """\
apiVersion: myolo.ai/v1
kind: ElasticJob
metadata: {{name: checked}}
spec:
  minReplicas: 2
  maxReplicas: 2
  trainer: {{model: {{name: tiny}}, optimizer: {{steps: 100000}}, data: {{globalBatch: 2, seqLen: 32, path: {data}, sha256: {sha}}}, runtime: {{seed: 0}}}}
"""


def _until(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    return poll_until(what, check, timeout)


def _rows(output: str, *words: str) -> list[str]:
    return [line for line in output.splitlines() if all(w in line for w in words)]


@pytest.mark.kafka
def test_preflight_passes_on_the_recorded_data_and_names_each_node_once_the_file_changed(
    tmp_path: Path, local_myoloctl
) -> None:
    myoloctl = local_myoloctl
    data = tmp_path / "train.bin"
    np.random.default_rng(3).integers(0, 256, size=20_000).astype(np.uint16).tofile(data)
    digest = hashlib.sha256(data.read_bytes()).hexdigest()
    broker = LocalBroker(tmp_path, tied_to_parent=True)
    try:
        broker.start(timeout=120)
        stack.start_members(tmp_path, coordinators=1, nodes=2, gpus=1, timeout=120, progress=lambda _: None)
        manifest = tmp_path / "job.yaml"
        manifest.write_text(MANIFEST.format(data=data, sha=digest))
        applied = myoloctl("apply", "-f", str(manifest))
        assert applied.exit_code == 0, applied.output

        def running() -> bool:
            job = json.loads(myoloctl("get", "job", "checked", "-o", "json").output)
            gen = job.get("generation") or {}
            return job["phase"] == "Running" and len(gen.get("members", [])) == 2

        _until("the job to run on both nodes", running, timeout=90)

        ok = myoloctl("preflight", "--skip", "nccl", "--timeout", "60")  # cuda: torch is imported on each node
        assert ok.exit_code == 0, ok.output
        for node in ("node-1", "node-2"):
            assert _rows(ok.output, node, "driver", "550.54.15 (sim)", "PASS"), ok.output
            assert _rows(ok.output, node, "memory", "% free", "PASS"), ok.output
            assert _rows(ok.output, node, f"data job/checked {data}", f"sha256 {digest[:12]}", "PASS"), ok.output
            # the trainer's interpreter asked on the node; the driver is the simulator's, so nothing to match
            assert _rows(ok.output, node, "cuda", "torch ", "(sim)", "SKIP", "simulated GPUs"), ok.output
            assert _rows(ok.output, node, "tfrecord", "SKIP", "no job on this node reads TFRecord"), ok.output
            assert _rows(ok.output, node, "rdma job/checked", "SKIP", "ib_write_lat is not installed"), ok.output
        assert "ready: 6 passed, 0 failed, 6 skipped on 2 node(s)" in ok.output

        changed = tmp_path / "train.bin.new"
        changed.write_bytes(b"\x01\x00" * 20_000)
        os.replace(changed, data)  # a new inode: the workers reading the old one are not disturbed
        bad = myoloctl("preflight", "--skip", "nccl", "--timeout", "30")
        assert bad.exit_code == 1, bad.output
        new = hashlib.sha256(data.read_bytes()).hexdigest()
        for node in ("node-1", "node-2"):
            (row,) = _rows(bad.output, node, "FAIL")
            assert f"{data} on {node} hashes to {new}, not the {digest} job checked recorded" in row, bad.output
        assert "NOT ready: 4 passed, 2 failed" in bad.output
    finally:
        stack.stop_members(tmp_path, progress=lambda _: None)
        broker.stop()
        for pid in pids_mentioning(str(tmp_path)):
            os.kill(pid, signal.SIGKILL)
