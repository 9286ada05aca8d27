"""A job generation's workers on this node, as the supervisor holds them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

import zmq

from myolo.agent.trainer.hang import HangWatch
from myolo.agent.trainer.launch import WorkerPlan
from myolo.events.payloads import StartWorkersArgs, WorkerInfo
from myolo.events.payloads.training import WorkerState

Ending = Literal["stopping", "faulted"]


@dataclass
class Worker:
    plan: WorkerPlan
    proc: asyncio.subprocess.Process
    state: WorkerState = "starting"
    last_step: int | None = None
    exit_code: int | None = None
    exited: asyncio.Event = field(default_factory=asyncio.Event)
    warm: bool = False  # a warm standby took this slot (else a cold spawn)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def saw_step(self, step: int) -> None:
        self.last_step = step if self.last_step is None else max(self.last_step, step)
        if self.state == "starting":
            self.state = "running"


@dataclass
class LocalJob:
    args: StartWorkersArgs
    workers: dict[int, Worker]  # by global rank
    control: zmq.Socket
    watch: HangWatch
    started: float  # agent's monotonic clock
    ending: Ending | None = None  # None: training; set once, by a stop or by a fault
    stop_task: asyncio.Task | None = None
    spawning: bool = False  # workers are still being started: an early exit does not end the job yet
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def job_id(self) -> str:
        return self.args.job_id

    @property
    def generation(self) -> int:
        return self.args.generation

    @property
    def last_step(self) -> int | None:
        steps = [w.last_step for w in self.workers.values() if w.last_step is not None]
        return max(steps) if steps else None

    def running(self) -> list[Worker]:
        return [w for w in self.workers.values() if not w.exited.is_set()]

    def info(self) -> list[WorkerInfo]:
        return [
            WorkerInfo(
                job_id=self.job_id,
                generation=self.generation,
                rank=rank,
                local_rank=w.plan.local_rank,
                gpu=w.plan.gpu,
                pid=w.pid,
                state=w.state,
                last_step=w.last_step,
                exit_code=w.exit_code,
            )
            for rank, w in sorted(self.workers.items())
        ]
