"""A fleet for pre-flight tests: the jobs' offline coordinator (``JobSim``) whose agents report a driver and GPU
memory, and answer ``hash_files`` and ``nccl_probe`` as the real agent does (``agent/commands/hash_files.py``,
``agent/commands/probe.py``)."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from coordinator.preflight.component import Preflight
from coordinator.preflight.records import PreflightReport
from events.payloads import CommandAck, GpuReading, NodeSample
from tests.support.coordinator.jobs_sim import JobSim

GIB = 2**30
DATA = b"token ids " * 1000
JOB = """\
apiVersion: myolo.ai/v1
kind: ElasticJob
metadata: {{name: {name}}}
spec:
  minReplicas: 1
  maxReplicas: 4
  trainer: {{model: tiny, steps: 400, globalBatch: 8, dataPath: {path}{sha}}}
"""


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def job_manifest(name: str = "tiny", path: str = "/srv/data/train.bin", digest: str | None = None) -> str:
    return JOB.format(name=name, path=path, sha=f", dataSha256: {digest}" if digest else "")


class PreflightSim(JobSim):
    """``driver`` and ``used_pct`` per node (defaults: 550.54.15, 50 % used of 80 GiB); ``files`` is what each
    node's disk holds (path -> bytes); ``busbw`` what each node's probe measures (GB/s)."""

    def __init__(self, tmp_path, nodes: tuple[str, ...] = ("n1", "n2"), **env: str) -> None:
        super().__init__(tmp_path, nodes=nodes, gpus=2, **env)
        self.preflight = self.coord.get(Preflight)
        self.driver: dict[str, str | None] = {}
        self.used_pct: dict[str, list[float]] = {}
        self.files: dict[str, dict[str, bytes]] = {n: {"/srv/data/train.bin": DATA} for n in nodes}
        self.busbw: dict[str, float] = {n: 20.0 for n in nodes}
        self.silent: set[str] = set()  # nodes whose agents take no command
        self.refuse: dict[str, str] = {}  # node -> reason its agent rejects every command with

    async def sample(self, node: str) -> None:
        self.seq[node] = self.seq.get(node, 0) + 1
        used = self.used_pct.get(node, [50.0] * self.gpus)
        gpus = [
            GpuReading(
                index=i,
                uuid=f"{node}-{i}",
                name="sim",
                util_gpu=self.util,
                mem_total_bytes=80 * GIB,
                mem_used_bytes=int(80 * GIB * used[i] / 100),
            )
            for i in range(self.gpus)
        ]
        driver = self.driver.get(node, "550.54.15 (sim)")
        sample = NodeSample(node_id=node, backend="sim", gpus=gpus, seq=self.seq[node], driver_version=driver)
        await self.deliver(sample, f"/x/{node}")

    def answer(self, action: str, args: dict[str, Any], node: str) -> dict[str, Any]:
        if action == "hash_files":
            disk = self.files.get(node, {})
            return {
                p: {"sha256": sha(disk[p]), "size": len(disk[p])}
                if p in disk
                else {"error": "cannot read it: No such file or directory"}
                for p in args["paths"]
            }
        return {
            "backend": "nccl",
            "world_size": args.get("world_size", 2),
            "points": 4,
            "peak_busbw_gbps": self.busbw[node],
            "peak_size_bytes": 16 << 20,
        }

    async def agents(self) -> None:
        """Every unanswered hash_files and nccl_probe command, answered by its node's agent."""
        for c in self.sent():
            if c.action not in ("hash_files", "nccl_probe") or c.node_id in self.silent:
                continue
            intent = self.commands.intent(c.command_id)
            if intent is None or intent.terminal:
                continue
            if c.node_id in self.refuse:
                ack = CommandAck(
                    command_id=c.command_id,
                    node_id=c.node_id,
                    epoch=c.epoch,
                    status="rejected",
                    reason=self.refuse[c.node_id],
                )
            else:
                ack = CommandAck(
                    command_id=c.command_id,
                    node_id=c.node_id,
                    epoch=c.epoch,
                    status="done",
                    result=self.answer(c.action, c.args, c.node_id),
                )
            await self.deliver(ack, f"/x/{c.node_id}")

    async def run(self, body: Any, by: str = "operator:alice", max_s: float = 1000.0) -> PreflightReport:
        """A pre-flight, with the agents answering and the clock moving until it reports."""
        task = asyncio.create_task(self.preflight.preflight(body, by))
        waited = 0.0
        while not task.done():
            for _ in range(5):
                await asyncio.sleep(0)
            await self.agents()
            await self.clock.advance(0.25)
            waited += 0.25
            assert waited < max_s, "the pre-flight never reported"
        return task.result()

    async def running_job(self, manifest: str) -> None:
        await self.jobs.apply(manifest, "alice")
        await self.second()
        await self.run_generation(manifest.split("name: ")[1].split("}")[0])
