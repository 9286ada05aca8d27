"""One pre-flight run: judge what the fleet view holds, ask each node's agent the rest, wait (bounded), report.

The readings (driver, GPU memory) come from each node's newest sample, so they cost nothing and are as fresh
as the node is Ready. The data and bandwidth checks ask the node: a signed ``hash_files`` command with the
paths of the jobs that run there, a signed ``check_tfrecords`` for the jobs whose data are TFRecord files, and a
signed ``nccl_probe``; the run waits for every answer up to its
timeout on the coordinator's clock, looking at the commands' outcomes as the jobs component does (the
commands component follows the acks). A node that does not answer in time FAILs its check with the reason;
its command lives on (``GET /v1/commands`` shows what became of it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog

from myolo.common.clock import Clock
from myolo.coordinator.commands.interface import CommandSender, SentCommand
from myolo.coordinator.fleet.interface import NodeState
from myolo.coordinator.jobs.interface import JobData, JobsAPI
from myolo.coordinator.preflight import checks, cuda, tfrecords
from myolo.coordinator.preflight.config import PreflightConfig
from myolo.coordinator.preflight.rdma import RdmaRun
from myolo.coordinator.preflight.records import (
    CHECKS,
    CheckName,
    CheckResult,
    PreflightReport,
    PreflightRequest,
    Thresholds,
)
from myolo.coordinator.preflight.tfrecords import TfRecordData
from myolo.events.payloads.commands import (
    ActionArgs,
    CheckTfrecordsArgs,
    CheckTfrecordsResult,
    HashFilesArgs,
    HashFilesResult,
    NcclProbeArgs,
    NcclProbeResult,
    RuntimeVersions,
    RuntimeVersionsArgs,
)

log = structlog.get_logger("myolo.coordinator.preflight")
# what each check's command answers (the ack's result), read before it is judged
RESULTS: dict[str, Any] = {
    "cuda": RuntimeVersions,
    "data": HashFilesResult,
    "tfrecord": CheckTfrecordsResult,
    "nccl": NcclProbeResult,
}
NO_SHA = "the job recorded no dataSha256"


@dataclass
class DataFile:
    """A job's data file to check on a node (its member)."""

    job: str
    path: str
    sha256: str


@dataclass
class Asked:
    """A command sent for one node's check, and the rows that wait on its answer."""

    node_id: str
    check: CheckName
    intent: SentCommand
    files: list[DataFile] = field(default_factory=list)
    tfrecords: list[TfRecordData] = field(default_factory=list)


def data_files(node_id: str, jobs: Iterable[JobData]) -> tuple[list[DataFile], list[CheckResult]]:
    """The data files of the jobs whose current generation runs on the node, and a SKIP row for each job that
    has nothing to check (synthetic data, no digest recorded, a relative path)."""
    files, skipped = [], []
    for rec in jobs:
        path, why = rec.data_path, None
        if path is None:
            why = "the job trains on synthetic data (no dataPath): nothing to hash"
        elif rec.data_sha256 is None:
            why = NO_SHA
        elif not path.startswith("/"):
            why = (
                "dataPath is relative: it resolves in the workers' run directory, not the agent's; give it as an "
                "absolute path to have it checked"
            )
        if why is None and path is not None and rec.data_sha256 is not None:
            files.append(DataFile(rec.job, path, rec.data_sha256))
        else:
            subject = f"job/{rec.job}" + (f" {path}" if path else "")
            skipped.append(
                CheckResult(node_id=node_id, check="data", verdict="SKIP", subject=subject, reason=why or "")
            )
    return files, skipped


class PreflightRun:
    def __init__(self, commands: CommandSender, clock: Clock, cfg: PreflightConfig, request: PreflightRequest) -> None:
        self.commands, self.clock, self.cfg, self.req = commands, clock, cfg, request
        self.checks: list[CheckName] = [c for c in CHECKS if request.checks is None or c in request.checks]
        self.timeout_s = request.timeout_s if request.timeout_s is not None else cfg.timeout_s
        self.rows: list[CheckResult] = []
        self.asked: list[Asked] = []

    async def run(self, nodes: Sequence[NodeState], jobs: JobsAPI, epoch: int, by: str) -> PreflightReport:
        started = self.clock.now()
        for node in nodes:
            await self._node(node, jobs)
        await self._wait()
        for asked in self.asked:
            self._answered(asked)
        if "rdma" in self.checks:  # after the first answers: a measurement saturates nothing, but needs two nodes
            rdma = RdmaRun(self.commands, self.clock, self.cfg.poll_s, self.timeout_s, self.req.max_rdma_latency_us)
            self.rows += await rdma.run([n for n in nodes if n.liveness == "Ready"], jobs.trainings())
        order = {n.node_id: i for i, n in enumerate(nodes)}
        self.rows.sort(key=lambda r: (order[r.node_id], CHECKS.index(r.check), r.subject or ""))
        counts = {v: sum(1 for r in self.rows if r.verdict == v) for v in ("PASS", "FAIL", "SKIP")}
        report = PreflightReport(
            ok=counts["FAIL"] == 0,
            passed=counts["PASS"],
            failed=counts["FAIL"],
            skipped=counts["SKIP"],
            nodes=[n.node_id for n in nodes],
            checks=self.checks,
            thresholds=Thresholds(
                min_driver=self.req.min_driver,
                min_free_memory_pct=self.req.min_free_memory_pct,
                min_busbw_gbps=self.req.min_busbw_gbps,
                timeout_s=self.timeout_s,
                min_cuda=self.req.min_cuda,
                min_cudnn=self.req.min_cudnn,
                max_rdma_latency_us=self.req.max_rdma_latency_us,
            ),
            results=self.rows,
            started=started,
            finished=self.clock.now(),
            epoch=epoch,
            by=by,
        )
        log.info("preflight done", by=by, ok=report.ok, nodes=len(nodes), failed=report.failed, epoch=epoch)
        return report

    # ---- per node -------------------------------------------------------------------------------------------
    async def _node(self, node: NodeState, jobs: JobsAPI) -> None:
        if node.liveness != "Ready":
            seen = f"last sample {self.clock.now() - node.last_seen:.0f} s ago" if node.last_seen else "never seen"
            why = f"the node is {node.liveness} ({seen}): its readings are stale and it cannot be asked"
            self.rows += [CheckResult(node_id=node.node_id, check=c, verdict="FAIL", reason=why) for c in self.checks]
            return
        if "driver" in self.checks:
            self.rows.append(checks.driver(node, self.req.min_driver))
        if "memory" in self.checks:
            self.rows.append(checks.memory(node, self.req.min_free_memory_pct))
        if "cuda" in self.checks:
            await self._ask(node, "cuda", RuntimeVersionsArgs(timeout_s=min(120.0, max(1.0, self.timeout_s))))
        if "data" in self.checks:
            files, skipped = data_files(node.node_id, jobs.data_on(node.node_id))
            self.rows += skipped
            if files:
                paths = list(dict.fromkeys(f.path for f in files))
                await self._ask(node, "data", HashFilesArgs(paths=paths, max_bytes=self.cfg.hash_max_bytes), files)
            elif not skipped:
                self.rows.append(
                    CheckResult(node_id=node.node_id, check="data", verdict="SKIP", reason="no job runs on this node")
                )
        if "tfrecord" in self.checks:
            await self._tfrecords(node, jobs.data_on(node.node_id))
        if "nccl" in self.checks:
            args = NcclProbeArgs(
                world_size=min(64, max(2, len(node.gpus))),
                timeout_s=min(self.cfg.probe_timeout_s, max(1.0, self.timeout_s)),
            )
            await self._ask(node, "nccl", args)

    async def _tfrecords(self, node: NodeState, jobs: Sequence[JobData]) -> None:
        data, skipped = tfrecords.tfrecord_data(node.node_id, jobs)
        self.rows += skipped
        if data:
            paths = list(dict.fromkeys(d.path for d in data))
            args = CheckTfrecordsArgs(paths=paths, max_bytes=self.cfg.hash_max_bytes)
            await self._ask(node, "tfrecord", args, tfrecords=data)
        elif not skipped:
            why = "no job on this node reads TFRecord files (a dataPath naming *.tfrecord)"
            self.rows.append(CheckResult(node_id=node.node_id, check="tfrecord", verdict="SKIP", reason=why))

    async def _ask(
        self,
        node: NodeState,
        check: CheckName,
        args: ActionArgs,
        files: list[DataFile] | None = None,
        tfrecords: list[TfRecordData] | None = None,
    ) -> None:
        try:
            intent = await self.commands.issue(node.node_id, args)
        except ValueError as exc:  # the arguments: our fault, said as it is
            self._failed(node.node_id, check, f"{args.action} could not be sent: {exc}", files, None, tfrecords)
            return
        self.asked.append(Asked(node.node_id, check, intent, files or [], tfrecords or []))

    async def _wait(self) -> None:
        """Until every command sent has an outcome, or the timeout (the coordinator's clock)."""
        deadline = self.clock.monotonic() + self.timeout_s
        while any(not self._finished(a) for a in self.asked):
            left = deadline - self.clock.monotonic()
            if left <= 0:
                return
            await self.clock.sleep(min(self.cfg.poll_s, left))

    def _finished(self, asked: Asked) -> bool:
        intent = self.commands.intent(asked.intent.command_id)
        return intent is None or intent.terminal

    # ---- answers --------------------------------------------------------------------------------------------
    def _answered(self, asked: Asked) -> None:
        intent = self.commands.intent(asked.intent.command_id) or asked.intent
        node, cid, action = asked.node_id, intent.command_id, intent.action
        if intent.outcome != "done":
            if intent.status == "pending":
                why = f"no answer within {self.timeout_s:g} s: the node's agent did not take {action} (is it running?)"
            elif intent.status == "accepted":
                why = f"no answer within {self.timeout_s:g} s: the node took {action} and is still at it"
            else:
                why = f"{action} {intent.status} on {node}: {intent.reason or 'no reason given'}"
            self._failed(node, asked.check, why, asked.files, cid, asked.tfrecords)
            return
        try:
            result = msgspec.convert(intent.result, RESULTS[asked.check])
        except msgspec.ValidationError as exc:
            why = f"the agent's {action} answer does not read: {exc}"
            self._failed(node, asked.check, why, asked.files, cid, asked.tfrecords)
            return
        for row in self._judge(asked, result):
            row.command_id = cid
            self.rows.append(row)

    def _judge(self, asked: Asked, result: Any) -> list[CheckResult]:
        """The rows of one node's answer (read as its check's result type)."""
        node = asked.node_id
        if asked.check == "cuda":
            return [cuda.judge(node, result, self.req.min_cuda, self.req.min_cudnn)]
        if asked.check == "tfrecord":
            return [tfrecords.judge(node, d.job, d.path, result.get(d.path)) for d in asked.tfrecords]
        if asked.check == "data":
            return [checks.data(node, f.job, f.path, f.sha256, result.get(f.path)) for f in asked.files]
        return [checks.nccl(node, result, self.req.min_busbw_gbps)]

    def _failed(
        self,
        node_id: str,
        check: CheckName,
        why: str,
        files: list[DataFile] | None,
        cid: str | None = None,
        tfrecord_data: list[TfRecordData] | None = None,
    ) -> None:
        """One FAIL row per job the command was about (data, tfrecord), else one for the node."""
        subjects = [(f"job/{f.job} {f.path}", f"sha256 {f.sha256}") for f in files or []] + [
            (f"job/{d.job} {d.path}", tfrecords.THRESHOLD) for d in tfrecord_data or []
        ]
        for subject, threshold in subjects or [(None, None)]:
            self.rows.append(
                CheckResult(
                    node_id=node_id,
                    check=check,
                    verdict="FAIL",
                    subject=subject,
                    threshold=threshold,
                    reason=why,
                    command_id=cid,
                )
            )
