"""The RDMA check: a short ``ib_write_lat`` run between two nodes of each job that spans nodes.

For each job whose current generation has members on two or more of the nodes checked, its first two nodes
run one measurement: the first as the server, then (once its agent took the command) the second as the client,
given the server's address. Both nodes get the row: PASS when the typical latency is within
``max_latency_us``; SKIP when either node lacks ``ib_write_lat`` (with the reason) or no job spans the node and
another; FAIL when the run failed or did not answer in time. A node is measured once per run (its first job).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from myolo.common.clock import Clock
from myolo.coordinator.commands.interface import CommandSender, SentCommand
from myolo.coordinator.fleet.interface import NodeState
from myolo.coordinator.jobs.interface import Training
from myolo.coordinator.preflight.records import CheckResult, Verdict
from myolo.events.payloads.commands import RdmaLatencyArgs, RdmaLatencyResult

NO_PAIR = "no job spans this node and another: there is no peer to measure RDMA latency with"


@dataclass
class Pair:
    job: str
    server: NodeState
    client: NodeState

    @property
    def subject(self) -> str:
        return f"job/{self.job} {self.server.node_id} <-> {self.client.node_id}"


def pairs(nodes: Sequence[NodeState], jobs: Sequence[Training]) -> tuple[list[Pair], list[str]]:
    """One pair per job spanning two of ``nodes`` (Ready, each node in one pair at most), and the nodes left."""
    ready = {n.node_id: n for n in nodes if n.liveness == "Ready"}
    used: set[str] = set()
    out: list[Pair] = []
    for job in sorted(jobs, key=lambda t: t.job):
        members = [n for n in dict.fromkeys(job.nodes) if n in ready and n not in used]
        if len(members) >= 2:
            out.append(Pair(job.job, ready[members[0]], ready[members[1]]))
            used.update(members[:2])
    return out, [n for n in ready if n not in used]


class RdmaRun:
    """The measurements of one pre-flight: ask, wait on the coordinator's clock, judge."""

    def __init__(
        self, commands: CommandSender, clock: Clock, poll_s: float, timeout_s: float, max_latency_us: float
    ) -> None:
        self.commands, self.clock, self.poll_s = commands, clock, poll_s
        self.timeout_s, self.max_latency_us = timeout_s, max_latency_us

    async def run(self, nodes: Sequence[NodeState], jobs: Sequence[Training]) -> list[CheckResult]:
        found, alone = pairs(nodes, jobs)
        rows = [CheckResult(node_id=n, check="rdma", verdict="SKIP", reason=NO_PAIR) for n in alone]
        for pair in found:
            rows += await self._measure(pair)
        return rows

    async def _measure(self, pair: Pair) -> list[CheckResult]:
        run_s = max(1.0, min(30.0, self.timeout_s / 2))
        try:
            server = await self.commands.issue(pair.server.node_id, RdmaLatencyArgs(role="server", timeout_s=run_s))
        except ValueError as exc:
            return self._rows(pair, "FAIL", f"rdma_latency could not be sent: {exc}")
        server = await self._until(server, lambda i: i.status != "pending")
        first = self._result(server)
        if first is not None and not first.available:
            return self._rows(pair, "SKIP", f"{pair.server.node_id}: {first.reason}")
        if server.status == "pending" or (server.terminal and server.outcome != "done"):
            return self._rows(pair, "FAIL", f"the server side on {pair.server.node_id}: {self._why(server)}")
        if not pair.server.address:
            return self._rows(pair, "FAIL", f"{pair.server.node_id} reports no address for its peer to reach")
        args = RdmaLatencyArgs(role="client", peer=pair.server.address, timeout_s=run_s)
        try:
            client = await self.commands.issue(pair.client.node_id, args)
        except ValueError as exc:
            return self._rows(pair, "FAIL", f"rdma_latency could not be sent: {exc}")
        client = await self._until(client, lambda i: i.terminal)
        answer = self._result(client)
        if answer is not None and not answer.available:
            return self._rows(pair, "SKIP", f"{pair.client.node_id}: {answer.reason}")
        if answer is None or client.outcome != "done" or answer.t_typical_us is None:
            why = (answer.error if answer is not None and answer.error else None) or self._why(client)
            return self._rows(pair, "FAIL", f"the client side on {pair.client.node_id}: {why}")
        t = answer.t_typical_us
        value = f"{t:.2f} us typical, {answer.t_avg_us or 0:.2f} us average ({answer.size} bytes, ib_write_lat)"
        if t <= self.max_latency_us:
            return self._rows(pair, "PASS", f"RDMA write latency <= {self.max_latency_us:g} us", value)
        why = (
            f"RDMA write latency {t:.2f} us is over {self.max_latency_us:g} us: check the HCA's link "
            "(ibstat: State Active, Rate), the switch, and that GPUDirect RDMA is not falling back to TCP"
        )
        return self._rows(pair, "FAIL", why, value)

    async def _until(self, intent: SentCommand, done) -> SentCommand:
        deadline = self.clock.monotonic() + self.timeout_s
        while True:
            now = self.commands.intent(intent.command_id) or intent
            if done(now) or self.clock.monotonic() >= deadline:
                return now
            await self.clock.sleep(self.poll_s)

    @staticmethod
    def _result(intent: SentCommand) -> RdmaLatencyResult | None:
        if not intent.result:
            return None
        try:
            return msgspec.convert(intent.result, RdmaLatencyResult)
        except msgspec.ValidationError:
            return None

    def _why(self, intent: SentCommand) -> str:
        if intent.status == "pending":
            return f"no answer within {self.timeout_s:g} s: the node's agent did not take rdma_latency"
        if intent.status == "accepted":
            return f"no answer within {self.timeout_s:g} s: the node took rdma_latency and is still at it"
        return f"rdma_latency {intent.status}: {intent.reason or 'no reason given'}"

    def _rows(self, pair: Pair, verdict: Verdict, reason: str, value: str | None = None) -> list[CheckResult]:
        return [
            CheckResult(
                node_id=n.node_id,
                check="rdma",
                verdict=verdict,
                value=value,
                threshold=f"<= {self.max_latency_us:g} us typical",
                reason=reason,
                subject=pair.subject,
            )
            for n in (pair.server, pair.client)
        ]
