"""A command whose acks were lost is judged by what it came to, through the real broker.

A real coordinator (every component, simulated time) sends its signed commands over Kafka to a node whose
command path is the agent's own (executor, ledger, consumer of ``myolo.commands``); the node's daemon is
played by the test: its actions answer as the agent's do and its samples report what runs there and its
version. Every ack of a command's first run is lost before it reaches the producer (the agent's ack send
failed), so the coordinator retries with the same id after ``retry_after_s``; the agent, which ran the
command once already, answers ``duplicate`` carrying the original outcome. Checked: an ``upgrade`` so
answered passes its gate and the rollout succeeds (no rollback), and a ``start_workers`` so answered starts
its generation (no restart, no second generation)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from myolo.agent.commands import CommandExecutor, build_command_consumer
from myolo.common.clock import SimClock
from myolo.common.keys import load_verify_key
from myolo.coordinator.commands.records import CommandIntent
from myolo.coordinator.core.coordinator import Coordinator
from myolo.coordinator.jobs.component import Jobs
from myolo.coordinator.rollouts.component import Rollouts
from myolo.coordinator.rollouts.config import Plan
from myolo.events.bus import EventProducer
from myolo.events.payloads import CommandAck, GpuReading, NodeSample, Payload, WorkerInfo
from myolo.events.payloads.commands import DrainArgs, ReportSampleArgs, StartWorkersArgs, StopWorkersArgs, UpgradeArgs
from myolo.events.settings import KafkaSettings
from myolo.events.signing import Verifier
from tests.integration.coordinator.conftest import commands, fleet, one_leader, wait_until
from tests.support.coordinator.identity import PlayedNodes
from tests.support.coordinator.jobs_sim import manifest

pytestmark = pytest.mark.kafka
OLD, NEW = "4.0.0", "4.1.0"
ENV = {
    "MYOLO_COMMANDS_RETRY_AFTER_S": "2.0",
    "MYOLO_FLEET_LOST_AFTER_S": "3600",
    # were a duplicate not judged by its outcome, these would be what the wave and the generation wait out
    "MYOLO_JOBS_START_TIMEOUT_S": "3600",
}


class LosingAcks:
    """The agent's ack sender (the node's signed producer), losing every ack of the first run of a command
    of the ``lose`` actions: the command's final ack and all before it never reach Kafka."""

    def __init__(self, played: PlayedNodes, lose: set[str]) -> None:
        self.played = played
        self.lose = lose
        self.executor: CommandExecutor | None = None
        self.lost: list[CommandAck] = []
        self._settled: set[str] = set()  # commands whose first run's acks were all lost

    async def send(self, payload: Payload) -> object:
        if isinstance(payload, CommandAck) and self.executor is not None:
            entry = self.executor.ledger.get(payload.command_id)
            if entry is not None and entry.action in self.lose and payload.command_id not in self._settled:
                self.lost.append(payload)
                if payload.status in ("done", "failed"):
                    self._settled.add(payload.command_id)
                return None
        return await self.played.send(payload)


class Node:
    """One node: the agent's real command path on the real broker, its daemon played by the test."""

    def __init__(self, settings: KafkaSettings, node_id: str, state_dir, key_file, played, clock, lose) -> None:
        self.node_id = node_id
        self.played = played
        self.version = OLD
        self.seq = 0
        self.calls: list[str] = []
        self.workers: list[WorkerInfo] = []
        self.acks = LosingAcks(played, lose)
        actions = {
            "drain": self.drain,
            "start_workers": self.start_workers,
            "stop_workers": self.stop_workers,
            "upgrade": self.upgrade,
            "report_sample": self.report_sample,
        }
        verifier = Verifier([load_verify_key(f"{key_file}.pub", "key")])
        self.executor = CommandExecutor(node_id, state_dir, verifier, self.acks, actions, clock)
        self.acks.executor = self.executor
        self._settings = settings
        self._consumer = None
        self._task: asyncio.Task | None = None

    async def start(self, dead_letters: EventProducer) -> None:
        self._consumer = build_command_consumer(self._settings, self.node_id, self.executor, dead_letters=dead_letters)
        self._task = asyncio.create_task(self._consumer.run())

    async def stop(self) -> None:
        if self._consumer is not None and self._task is not None:
            await self._consumer.stop()
            await asyncio.wait_for(self._task, 30)
        await self.executor.close()

    # ---- the daemon's actions, answering as the agent's do
    async def drain(self, args: DrainArgs) -> dict[str, Any]:
        self.calls.append("drain")
        return {"draining": args.draining, "stopped": []}

    async def report_sample(self, _: ReportSampleArgs) -> dict[str, Any]:
        await self.sample()
        return {"seq": self.seq}

    async def start_workers(self, args: StartWorkersArgs) -> dict[str, Any]:
        self.calls.append("start_workers")
        self.workers = [
            WorkerInfo(
                job_id=args.job_id,
                generation=args.generation,
                rank=args.global_rank(i),
                local_rank=i,
                gpu=g,
                pid=1000 + i,
                state="running",
            )
            for i, g in enumerate(args.gpus)
        ]
        pids = [w.pid for w in self.workers]
        return {"job_id": args.job_id, "generation": args.generation, "pids": pids, "world_size": args.world_size}

    async def stop_workers(self, args: StopWorkersArgs) -> dict[str, Any]:
        self.calls.append("stop_workers")
        self.workers = [w for w in self.workers if (w.job_id, w.generation) != (args.job_id, args.generation)]
        return {"job_id": args.job_id, "generation": args.generation, "stopped": True}

    async def upgrade(self, args: UpgradeArgs) -> dict[str, Any]:
        self.calls.append("upgrade")
        previous, self.version = self.version, args.version  # installed and restarted into it
        return {"component": args.component, "version": args.version, "previous": previous, "restart": "exec"}

    async def sample(self) -> int:
        self.seq += 1
        gpus = [GpuReading(index=0, uuid=f"{self.node_id}-0", name="sim", util_gpu=50.0)]
        sample = NodeSample(
            node_id=self.node_id,
            backend="sim",
            gpus=gpus,
            seq=self.seq,
            agent_version=self.version,
            workers=list(self.workers),
            address="127.0.0.1",
        )
        await self.played.send(sample, signed=False)
        return self.seq


async def live(svc: Coordinator, node: Node, clock: SimClock, done, what: str, seconds: int = 120) -> None:
    """Fleet life on simulated time, half a second a step: the node samples (and the coordinator has read the
    sample before time moves on), the coordinator ticks; until ``done()``."""
    for _ in range(seconds * 2):
        if done():
            return
        seq = await node.sample()
        try:
            await wait_until(lambda s=seq: (n := fleet(svc).node(node.node_id)) and n.last_seq == s, 30, "the sample")
        except AssertionError:
            raise AssertionError(
                f"{what}: the coordinator did not read {node.node_id}'s sample {seq}: {fleet(svc).node(node.node_id)}"
            ) from None
        await clock.advance(0.5)
        await node.executor.drain()
    assert done(), f"not within {seconds} s of simulated time: {what}"


async def coordinator_and_node(
    settings, make_config, services, producer, key_file, clock, tmp_path, lose: set[str]
) -> tuple[Coordinator, Node]:
    tag = uuid.uuid4().hex[:6]
    svc = await services.start(make_config(f"c-{tag}", **ENV), clock)
    await one_leader(svc)
    await wait_until(lambda: svc.ingest.ready.is_set(), 30, "ingest")
    played = PlayedNodes(producer, clock)
    node = Node(settings, f"n-{tag}", tmp_path / "agent", key_file, played, clock, lose)
    await played.enroll(svc, node.node_id)
    await node.start(producer)
    await live(svc, node, clock, lambda: (n := fleet(svc).node(node.node_id)) and n.liveness == "Ready", "Ready")
    return svc, node


def first(svc: Coordinator, node: Node, action: str) -> CommandIntent:
    mine = [i for i in commands(svc).intents() if i.node_id == node.node_id and i.action == action]
    assert mine, f"no {action} sent to {node.node_id}"
    return mine[0]


async def test_an_upgrade_whose_acks_were_lost_passes_its_gate(
    settings, make_config, services, producer, key_file, clock, tmp_path
) -> None:
    svc, node = await coordinator_and_node(
        settings, make_config, services, producer, key_file, clock, tmp_path, {"upgrade"}
    )
    try:
        rollouts = svc.get(Rollouts)
        plan = Plan(waves=[100], bake_s=5, baseline_s=5, drain_timeout_s=5, upgrade_timeout_s=3600)
        rec = await rollouts.start(
            "agent", NEW, "/srv/releases/myolotrain-4.1.0-py3-none-any.whl", "ab" * 32, "op", plan
        )
        await live(svc, node, clock, lambda: rollouts.rollout(rec.name).terminal, "the rollout to end")
        rec = rollouts.rollout(rec.name)
        assert rec.status.phase == "Succeeded" and rec.status.failed_gate is None, (
            rec.status.phase,
            rec.status.reason,
            rec.status.failed_gate,
        )
        upgrade = first(svc, node, "upgrade")
        assert node.calls.count("upgrade") == 1  # run once: the retry met the id already taken
        assert [a.status for a in node.acks.lost] == ["accepted", "done"]  # the first run's acks never arrived
        assert upgrade.attempts >= 2 and upgrade.status == "duplicate" and upgrade.original == "done"
        assert upgrade.result["previous"] == OLD
        assert [i for i in commands(svc).intents() if i.action == "rollback"] == []
    finally:
        await node.stop()


async def test_a_start_whose_acks_were_lost_starts_its_generation(
    settings, make_config, services, producer, key_file, clock, tmp_path
) -> None:
    svc, node = await coordinator_and_node(
        settings, make_config, services, producer, key_file, clock, tmp_path, {"start_workers"}
    )
    try:
        jobs = svc.get(Jobs)
        name = f"lost-{uuid.uuid4().hex[:6]}"
        await jobs.apply(manifest(name, lo=1, hi=1), "alice")
        await live(
            svc, node, clock, lambda: (j := jobs.job(name)) is not None and j.status.phase == "Running", "Running"
        )
        job = jobs.job(name)
        assert (
            job.status.generation.number == 1 and job.status.generation.stage == "running" and job.status.restarts == 0
        )
        start = first(svc, node, "start_workers")
        assert node.calls.count("start_workers") == 1
        assert [a.status for a in node.acks.lost] == ["accepted", "done"]
        assert start.attempts >= 2 and start.status == "duplicate" and start.original == "done"
        assert [d.kind for d in job.status.decisions] == ["start"]
    finally:
        await node.stop()
