"""A supervisor whose "trainer" is ``fake_worker.py``: real processes and real ZeroMQ, no torch."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from myolo.agent.trainer.config import TrainerConfig
from myolo.agent.trainer.supervisor import Supervisor
from myolo.common.clock import Clock, SystemClock
from myolo.events.payloads import Payload, StartWorkersArgs, TrainingCompleted, TrainingFault, TrainingProgress

FAKE = Path(__file__).parents[3] / "support" / "agent" / "fake_worker.py"


@dataclass
class Node:
    sup: Supervisor
    published: list[Payload] = field(default_factory=list)
    urgent: list[Payload] = field(default_factory=list)
    gpu_use: list[dict[int, list[int]]] = field(default_factory=list)
    draining: bool = False

    def of(self, cls: type[Payload]) -> list[Any]:
        return [p for p in self.published if isinstance(p, cls)]

    @property
    def progress(self) -> list[TrainingProgress]:
        return self.of(TrainingProgress)

    @property
    def faults(self) -> list[TrainingFault]:
        return self.of(TrainingFault)

    @property
    def completions(self) -> list[TrainingCompleted]:
        return self.of(TrainingCompleted)


def start_args(gpus: list[int], job_id: str = "j1", generation: int = 0, **job: Any) -> StartWorkersArgs:
    return StartWorkersArgs(
        job_id=job_id,
        generation=generation,
        node_rank=0,
        nnodes=1,
        gpus=gpus,
        master_addr="127.0.0.1",
        master_port=29500,
    )


async def make_node(tmp_path: Path, clock: Clock, env: dict[str, str], **cfg: Any) -> Node:
    defaults = {"progress_interval_s": 0.0, "term_grace_s": 2.0, "stop_timeout_s": 10.0, "warm_workers": 0}
    config = TrainerConfig(**{**defaults, **cfg})
    node: Node | None = None

    def publish(payload: Payload, urgent: bool = False) -> None:
        assert node is not None
        node.published.append(payload)
        if urgent:
            node.urgent.append(payload)

    sup = Supervisor(
        config,
        node_id="node-a",
        clock=clock,
        publish=publish,
        workers_dir=tmp_path / "workers",
        gpu_count=lambda: 4,
        real_gpus=False,
        python=(sys.executable, str(FAKE)),
        on_gpu_use=lambda use: node.gpu_use.append(use) if node else None,
        base_env={**os.environ, **env},
        socket_dir=tmp_path,
        accepting=lambda: not (node and node.draining),
    )
    node = Node(sup)
    sup.open()
    return node


@pytest.fixture
async def node_factory(tmp_path: Path) -> AsyncIterator[Any]:
    made: list[tuple[Node, Any]] = []

    async def make(env: dict[str, str] | None = None, clock: Clock | None = None, **cfg: Any) -> Node:
        import asyncio

        node = await make_node(tmp_path, clock or SystemClock(), env or {}, **cfg)
        task = asyncio.create_task(node.sup.run())
        made.append((node, task))
        return node

    yield make
    for node, task in made:
        await node.sup.close()
        task.cancel()
