"""A fleet for pre-flight tests: the jobs' offline coordinator (``JobSim``) whose agents report a driver and GPU
memory, and answer ``hash_files``, ``check_tfrecords`` and ``nccl_probe`` as the real agent does
(``agent/commands/hash_files.py``, ``agent/tfrecord/check.py`` over the simulated disk, ``agent/commands/probe.py``)."""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import io
from typing import Any

import msgspec

from myolo.agent.tfrecord.check import check_stream
from myolo.coordinator.preflight.component import Preflight
from myolo.coordinator.preflight.records import PreflightReport
from myolo.events.payloads import CommandAck, GpuReading, NodeSample
from myolo.events.payloads.commands import RuntimeVersions
from tests.support.coordinator.jobs_sim import JobSim

GIB = 2**30
GOOD_VERSIONS = {"torch": "2.4.0", "cuda": "12.4", "cudnn": "9.1.0", "driver": "550.54.15", "driver_cuda": "12.4"}
DATA = b"token ids " * 1000
JOB = """\
apiVersion: myolo.ai/v1
kind: ElasticJob
metadata: {{name: {name}}}
spec:
  minReplicas: 1
  maxReplicas: 4
  trainer: {{model: {{name: tiny}}, optimizer: {{steps: 400}}, data: {{globalBatch: 8, path: {path}{sha}}}}}
"""


ANSWERED = ("hash_files", "check_tfrecords", "runtime_versions", "nccl_probe", "rdma_latency")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def job_manifest(name: str = "tiny", path: str = "/srv/data/train.bin", digest: str | None = None) -> str:
    return JOB.format(name=name, path=path, sha=f", sha256: {digest}" if digest else "")


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
        # what each node's trainer interpreter and driver say (runtime_versions), and its ib_write_lat latency
        # in us (None: the tool is not installed)
        self.versions: dict[str, RuntimeVersions] = {n: RuntimeVersions(**GOOD_VERSIONS) for n in nodes}
        self.rdma_us: dict[str, float | None] = {n: None for n in nodes}
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
        sample = NodeSample(
            node_id=node, backend="sim", gpus=gpus, seq=self.seq[node], driver_version=driver, address=f"{node}.lan"
        )
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
        if action == "check_tfrecords":
            return {p: self.tfrecords(node, p) for p in args["paths"]}
        if action == "runtime_versions":
            return msgspec.to_builtins(self.versions[node])
        if action == "rdma_latency":
            us = self.rdma_us.get(node)
            if us is None:
                return {
                    "role": args["role"],
                    "available": False,
                    "reason": "ib_write_lat is not installed on this node",
                }
            return {"role": args["role"], "size": 2, "t_typical_us": us, "t_avg_us": us * 1.02, "t_max_us": us * 4}
        return {
            "backend": "nccl",
            "world_size": args.get("world_size", 2),
            "points": 4,
            "peak_busbw_gbps": self.busbw[node],
            "peak_size_bytes": 16 << 20,
        }

    def tfrecords(self, node: str, pattern: str) -> dict[str, Any]:
        """What the agent answers for one path or pattern: the real checker over the simulated disk's bytes."""
        disk = self.files.get(node, {})
        names = sorted(p for p in disk if fnmatch.fnmatchcase(p, pattern))
        if not names:
            return {"error": "no file matches it on this node"}
        files = [check_stream(io.BytesIO(disk[n]), n, len(disk[n])) for n in names]
        return {"files": [msgspec.to_builtins(f) for f in files]}

    async def agents(self) -> None:
        """Every unanswered hash_files and nccl_probe command, answered by its node's agent."""
        for c in self.sent():
            if c.action not in ANSWERED or c.node_id in self.silent:
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
