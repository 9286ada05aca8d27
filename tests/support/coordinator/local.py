"""The local stack as the end-to-end tests use it: start its members and wait for the fleet, a steady
training job's manifest, and the clean-up that leaves no process behind."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from myolo.coordinator.cli.auth import stack_token
from myolo.coordinator.localstack import stack
from myolo.coordinator.localstack.broker import LocalBroker, state
from tests.support.helpers import pids_mentioning

NODES = ("node-1", "node-2", "node-3")
MANIFEST = """\
apiVersion: myolo.ai/v1
kind: ElasticJob
metadata: {{name: {name}}}
spec:
  minReplicas: 1
  maxReplicas: 3
  maxRestarts: {restarts}
  replica: {{tp: 1, pp: 1}}
  trainer: {{model: {{name: tiny}}, optimizer: {{steps: {steps}}}, data: {{globalBatch: 6, seqLen: 32}}, runtime: {{seed: 0}}, checkpoint: {{every: {every}, snapshotEvery: 1}}}}
  checkpointDir: {ckpt}
"""


def steady_job(
    name: str, ckpt: Path, *, steps: int = 100_000, checkpoint_every: int = 50, max_restarts: int = 10
) -> str:
    """An elastic ``tiny`` job on 1 to 3 replicas that trains for as long as a test runs."""
    return MANIFEST.format(name=name, ckpt=ckpt, steps=steps, every=checkpoint_every, restarts=max_restarts)


def start_members(
    root: Path,
    *,
    coordinators: int,
    nodes: int = 3,
    bootstrap: str | None = None,
    kafka_extra: dict[str, Any] | None = None,
    releases_extra: dict[str, Any] | None = None,
    progress=lambda _: None,
) -> dict[str, state.ProcessRecord]:
    """Coordinators and agents (one simulated GPU each) on the running broker; returns once the fleet shows
    every node. ``bootstrap``: where the members reach Kafka instead of the broker's own address."""
    stack.start_members(
        root,
        coordinators=coordinators,
        nodes=nodes,
        gpus=1,
        timeout=180,
        progress=progress,
        bootstrap=bootstrap,
        kafka_extra=kafka_extra,
        releases_extra=releases_extra,
    )
    records = {p.name: p for p in state.load(root).processes}
    urls = [r.info["api_url"] for r in records.values() if r.role == "coordinator"]
    stack.wait_fleet(urls, [f"node-{i}" for i in range(1, nodes + 1)], 120, stack_token(root))
    return records


def stop_all(root: Path, broker: LocalBroker) -> None:
    """The members, then the broker; anything still naming ``root`` is killed."""
    stack.stop_members(root, progress=lambda _: None)
    broker.stop()
    for pid in pids_mentioning(str(root)):
        os.kill(pid, signal.SIGKILL)
