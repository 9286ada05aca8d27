"""Agents with the training supervisor on, a signing "coordinator", and readers of what reached Kafka.

Everything is real: `myolo-agent run` processes (simulated GPUs), the trainer's workers (torch, gloo on
loopback), the broker. ``Rig.start`` / ``Rig.stop`` send signed commands; ``Rig.progress`` / ``faults`` /
``completions`` / ``acks`` are the events consumed from the broker so far.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from myolo.common.keys import Ed25519Signer
from myolo.events.bus import EventConsumer, EventProducer
from myolo.events.payloads import Command, CommandAck, Payload, TrainingCompleted, TrainingFault, TrainingProgress
from myolo.events.payloads.trainer_values import nest
from myolo.events.settings import KafkaSettings
from myolo.events.topics import COMMAND_ACKS, TRAINING_PROGRESS
from tests.support.agent.agent_proc import AgentProc
from tests.support.helpers import free_port, new_ed25519_key, wait_until

TRAINER_TOML = """
[trainer]
progress_interval_s = {progress_interval_s}
hang_floor_s = {hang_floor_s}
startup_timeout_s = 300.0
stop_timeout_s = 60.0
term_grace_s = 5.0
"""
# the tiny job every trainer test starts, by field path; ``tiny_job`` lays changes over it as sections
TINY_FIELDS: dict[str, Any] = {"model.name": "tiny", "runtime.seed": 0, "data.global_batch": 4, "data.seq_len": 16}


def tiny_job(changes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``start_workers`` job (a table per section) of TINY_FIELDS with ``changes`` by field path
    (``{"optimizer.steps": 12}``); values are not checked here, so a test can send a bad one."""
    return nest({**TINY_FIELDS, **(changes or {})})


TINY_JOB: dict[str, Any] = tiny_job()


@dataclass
class Rig:
    settings: KafkaSettings
    key: Ed25519Signer
    leader: EventProducer
    agents: list[AgentProc]
    events: list[Payload] = field(default_factory=list)
    epoch: int = 7

    def of(self, cls: type, job_id: str) -> list[Any]:
        return [e for e in self.events if isinstance(e, cls) and getattr(e, "job_id", None) == job_id]

    def progress(self, job_id: str) -> list[TrainingProgress]:
        return self.of(TrainingProgress, job_id)

    def faults(self, job_id: str) -> list[TrainingFault]:
        return self.of(TrainingFault, job_id)

    def completions(self, job_id: str) -> list[TrainingCompleted]:
        return self.of(TrainingCompleted, job_id)

    def acks(self, command_id: str) -> list[CommandAck]:
        return [e for e in self.events if isinstance(e, CommandAck) and e.command_id == command_id]

    def final_ack(self, command_id: str) -> CommandAck | None:
        return next((a for a in self.acks(command_id) if a.status != "accepted"), None)

    async def command(self, agent: AgentProc, action: str, **args: Any) -> str:
        command_id = f"{action}-{uuid.uuid4().hex[:8]}"
        cmd = Command(command_id=command_id, node_id=agent.node_id, epoch=self.epoch, action=action, args=args)
        await self.leader.send(cmd)
        return command_id

    async def outcome(self, command_id: str, timeout: float = 120.0) -> CommandAck:
        await wait_until(lambda: self.final_ack(command_id), timeout, f"the outcome of {command_id}{self.logs()}")
        ack = self.final_ack(command_id)
        assert ack is not None
        return ack

    async def running(self, job_id: str, job: dict[str, Any], gpus: list[int], progress: int = 1) -> dict[str, int]:
        """Start ``job`` on the one agent, wait for ``progress`` progress events; the workers' pids by rank."""
        (cid,) = await self.start_job(job_id, job, [gpus])
        pids = (await self.outcome(cid)).result["pids"]
        await wait_until(lambda: len(self.progress(job_id)) >= progress, 120, f"progress{self.logs()}")
        return pids

    def logs(self) -> str:
        return "".join(f"\n--- {a.node_id}\n{a.log_text()[-6000:]}" for a in self.agents)

    async def start_job(
        self, job_id: str, job: dict[str, Any], gpus_per_node: list[list[int]], **extra: Any
    ) -> list[str]:
        """``start_workers`` to every agent (node rank = its position); the command ids."""
        port = free_port()
        return [
            await self.command(
                agent,
                "start_workers",
                job_id=job_id,
                generation=extra.get("generation", 0),
                node_rank=rank,
                nnodes=len(self.agents),
                gpus=gpus,
                master_addr="127.0.0.1",
                master_port=port,
                job=job,
            )
            for rank, (agent, gpus) in enumerate(zip(self.agents, gpus_per_node, strict=True))
        ]


@contextlib.asynccontextmanager
async def rig(
    settings: KafkaSettings,
    kafka: Any,
    tmp_path: Path,
    monkeypatch: Any,
    *,
    nodes: int = 1,
    gpus: int = 2,
    **trainer: Any,
) -> AsyncIterator[Rig]:
    key_file = tmp_path / "coordinator.key"
    key = new_ed25519_key(key_file)
    monkeypatch.setenv("MYOLO_COMMANDS_ENABLED", "true")
    monkeypatch.setenv("MYOLO_COMMANDS_KEY_FILES", f'["{key_file}.pub"]')  # the agent trusts the public half
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    toml = TRAINER_TOML.format(**{"progress_interval_s": 0.0, "hang_floor_s": 60.0, **trainer})
    agents = [AgentProc(kafka.bootstrap, gpus=gpus, interval_s=0.5, extra_toml=toml) for _ in range(nodes)]
    async with (
        EventProducer(settings, source="/myolo/coordinator/it", signer=key) as leader,
        EventProducer(settings, source="/myolo/test/trainer") as dlq,
    ):
        the_rig = Rig(settings, key, leader, agents)
        node_ids = {a.node_id for a in agents}

        async def collect(event, info) -> None:
            data = event.data
            if getattr(data, "node_id", None) in node_ids or isinstance(data, TrainingProgress):
                the_rig.events.append(data)

        reader = EventConsumer(
            settings, [COMMAND_ACKS, TRAINING_PROGRESS], f"it-trainer-{uuid.uuid4().hex}", collect, dead_letters=dlq
        )
        reader_task = asyncio.create_task(reader.run())
        try:
            for agent in agents:
                await agent.start()
            for agent in agents:
                await wait_until(lambda a=agent: "READY" in a.kinds(), 60, f"READY=1\n{agent.log_text()}")
            yield the_rig
        finally:
            for agent in agents:
                agent.signal()
            for agent in agents:
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(agent.proc.wait, 90)
            await reader.stop()
            reader_task.cancel()
            for agent in agents:
                await agent.cleanup()
