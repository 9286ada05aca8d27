"""A real coordinator with the real jobs component, offline: simulated time, Kafka's writes recorded, the
agents played by the test (samples, command acks, training progress, faults and completions)."""

from __future__ import annotations

import asyncio
from typing import Any

from myolo.common.clock import SimClock
from myolo.coordinator.commands.component import Commands
from myolo.coordinator.cordons.component import Cordons
from myolo.coordinator.core.coordinator import Coordinator
from myolo.coordinator.core.ingest import IngestState
from myolo.coordinator.core.leadership import LeaderTerm
from myolo.coordinator.fleet.component import Fleet
from myolo.coordinator.jobs.component import Jobs
from myolo.coordinator.jobs.records import STATE_JOBS, JobRecord
from myolo.events.bus import RecordInfo
from myolo.events.envelope import new_event
from myolo.events.payloads import (
    Command,
    CommandAck,
    GpuReading,
    NodeSample,
    TrainingCompleted,
    TrainingFault,
    TrainingProgress,
    WorkerInfo,
)
from tests.support.coordinator.offline import offline_coordinator
from tests.support.coordinator.recorder import recording_producers

INFO = RecordInfo("t", 0, 0)

MANIFEST = """\
apiVersion: myolo.ai/v1
kind: ElasticJob
metadata: {{name: {name}}}
spec:
  minReplicas: {min}
  maxReplicas: {max}
  replica: {{tp: 1, pp: 1}}
  trainer: {{model: {{name: tiny}}, optimizer: {{steps: 400}}, data: {{globalBatch: 12, seqLen: 64}}, runtime: {{seed: 0}}, checkpoint: {{every: 20, snapshotEvery: 1}}}}
  checkpointDir: /srv/ckpt/{name}
  maxRestarts: {restarts}
{extra}"""


def manifest(name: str = "tiny", lo: int = 1, hi: int = 3, restarts: int = 10, extra: str = "") -> str:
    return MANIFEST.format(name=name, min=lo, max=hi, restarts=restarts, extra=extra)


class Hearing:
    def state(self) -> IngestState:
        return IngestState(assigned=True, answer_age_s=0.1, lag_s=0.0)


class JobSim:
    def __init__(self, tmp_path, nodes: tuple[str, ...] = ("n1", "n2", "n3"), gpus: int = 1, **env: str) -> None:
        self.clock = SimClock()
        self.writes, producers = recording_producers()
        self.coord: Coordinator = offline_coordinator(tmp_path, self.clock, producers, **env)
        self.fleet, self.cordons = self.coord.get(Fleet), self.coord.get(Cordons)
        self.commands, self.jobs = self.coord.get(Commands), self.coord.get(Jobs)
        self.nodes = list(nodes)
        self.gpus = gpus
        self.seq: dict[str, int] = {}
        self.dead: set[str] = set()
        self.util = 50.0
        self.workers: dict[str, list[tuple[str, int]]] | None = None  # what each agent's samples say runs there
        self.fleet.ctx.ingest = Hearing()  # the coordinator hears the bus: silent nodes are judged

    async def start(self, epoch: int = 3) -> None:
        await self.coord.assume_term(LeaderTerm(epoch=epoch, instance_id="me", started=self.clock.now()))
        self.writer = asyncio.create_task(self.cordons.writer.run())
        await self.second()

    async def close(self) -> None:
        self.writer.cancel()

    # ---- the agents -----------------------------------------------------------------------------------------
    async def deliver(self, payload: Any, source: str = "/myolo/agent/test") -> None:
        await self.coord.router(new_event(payload, source, clock=self.clock), INFO)

    async def sample(self, node: str) -> None:
        self.seq[node] = self.seq.get(node, 0) + 1
        gpus = [GpuReading(index=i, uuid=f"{node}-{i}", name="sim", util_gpu=self.util) for i in range(self.gpus)]
        workers = None
        if self.workers is not None:
            workers = [
                WorkerInfo(job_id=job, generation=gen, rank=0, local_rank=0, gpu=0, pid=100, state="running")
                for job, gen in self.workers.get(node, [])
            ]
        sample = NodeSample(node_id=node, backend="sim", gpus=gpus, seq=self.seq[node], workers=workers)
        await self.deliver(sample, f"/x/{node}")

    async def second(self, n: int = 1) -> None:
        """``n`` seconds of fleet life: live nodes sample, the coordinator ticks."""
        for _ in range(n):
            for node in self.nodes:
                if node not in self.dead:
                    await self.sample(node)
            for _ in range(2):
                await self.clock.advance(0.5)
                await self.coord.tick()
            for _ in range(5):
                await asyncio.sleep(0)

    def sent(self, action: str | None = None) -> list[Command]:
        return [
            c for kind, c in self.writes if kind == "send" and isinstance(c, Command) and action in (None, c.action)
        ]

    async def ack(
        self, command: Command, status: str = "done", reason: str | None = None, original: str | None = None
    ) -> None:
        ack = CommandAck(
            command_id=command.command_id,
            node_id=command.node_id,
            epoch=command.epoch,
            status=status,
            reason=reason,
            original=original,
        )
        await self.deliver(ack, f"/x/{command.node_id}")

    async def ack_all(self, action: str, status: str = "done") -> list[Command]:
        """Answer every command of ``action`` not answered yet (a live node's agent)."""
        done = []
        for c in self.sent(action):
            intent = self.commands.intent(c.command_id)
            if intent is not None and not intent.terminal and c.node_id not in self.dead:
                await self.ack(c, status)
                done.append(c)
        return done

    async def progress(self, job: str, generation: int, step: int, replicas: int, **kw: Any) -> None:
        for dp in range(replicas):
            p = TrainingProgress(
                job_id=job,
                generation=generation,
                rank=dp,
                world_size=replicas,
                dp_rank=dp,
                step=step,
                loss=5.0 - step * 0.01,
                tokens_per_s=kw.get("tokens_per_s", 1000.0),
                step_time_s=kw.get("step_times", {}).get(dp, 0.2),
                gradient_staleness=kw.get("staleness", 0),
                node_id=kw.get("nodes", {}).get(dp),
            )
            await self.deliver(p)

    async def fault(self, job: str, generation: int, node: str, rank: int = 0) -> None:
        await self.deliver(
            TrainingFault(job_id=job, generation=generation, node_id=node, kind="worker_exit", rank=rank, exit_code=1)
        )

    async def completed(self, job: str, generation: int, node: str, last_step: int) -> None:
        await self.deliver(
            TrainingCompleted(job_id=job, generation=generation, node_id=node, ranks=[0], last_step=last_step)
        )

    # ---- the job --------------------------------------------------------------------------------------------
    def job(self, name: str = "tiny") -> JobRecord:
        rec = self.jobs.job(name)
        assert rec is not None
        return rec

    def written(self, name: str = "tiny") -> list[JobRecord | None]:
        return [r for topic, r in self.writes if topic == STATE_JOBS and (r is None or r.name == name)]

    async def run_generation(self, name: str = "tiny") -> JobRecord:
        """Let the agents stop the previous generation and start the new one, until it runs."""
        for _ in range(6):
            await self.ack_all("stop_workers")
            await self.second()
            await self.ack_all("start_workers")
            await self.second()
            if self.job(name).status.generation is not None and self.job(name).status.generation.stage == "running":
                break
        return self.job(name)
