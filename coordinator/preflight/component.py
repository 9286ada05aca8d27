"""The preflight component: the pre-upgrade checklist, run through the agents on the leader's word.

``POST /v1/preflight`` checks the nodes asked for (default: every Ready node) for a recent enough GPU driver,
enough free GPU memory, the CUDA and cuDNN the trainer loads against the driver, each job's data file against
the SHA-256 the job recorded, each job's TFRecord files record by record, the all-reduce bandwidth a probe
measures and the RDMA latency between two nodes of a job, and answers a report of one row per node and check (see ``records.py`` for the
verdicts and ``runner.py`` for where each value comes from). The leader alone runs it, since it sends signed
commands; one run at a time, so two operators do not probe the same nodes at once. Nothing is stored: the
report is the answer (and the commands it sent stay in ``GET /v1/commands`` for an hour).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import structlog

from myolo.coordinator.commands.interface import CommandSender
from myolo.coordinator.core.component import Component, RouteSet
from myolo.coordinator.core.context import Context
from myolo.coordinator.fleet.interface import FleetNodes, NodeState
from myolo.coordinator.jobs.interface import JobsAPI
from myolo.coordinator.preflight import routes
from myolo.coordinator.preflight.config import PreflightConfig, check
from myolo.coordinator.preflight.interface import PreflightRefused, UnknownPreflightNode
from myolo.coordinator.preflight.records import PreflightReport, PreflightRequest
from myolo.coordinator.preflight.runner import PreflightRun

log = structlog.get_logger("myolo.coordinator.preflight")


class Preflight(Component):
    name = "preflight"
    requires = (
        FleetNodes,
        CommandSender,
        JobsAPI,
    )
    openapi = Path(__file__).with_name("openapi.yaml")
    config = PreflightConfig

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.cfg: PreflightConfig = ctx.config
        self.fleet = ctx.need(FleetNodes)
        self.commands = ctx.need(CommandSender)
        self.jobs = ctx.need(JobsAPI)
        self._running: str | None = None  # who runs one now
        self._lock = asyncio.Lock()
        self.runs = 0
        self.failed_runs = 0
        self.last: PreflightReport | None = None

    @classmethod
    def check_config(cls, section: PreflightConfig, core: Any) -> None:
        check(section, core)

    async def preflight(self, request: PreflightRequest, by: str) -> PreflightReport:
        """Run the checklist (see ``api.Preflights``)."""
        epoch = self.ctx.leadership.require()
        nodes = self._nodes(request)
        if self._lock.locked():
            raise PreflightRefused(
                f"a pre-flight started by {self._running} is running",
                "wait for its report (it ends within its timeout_s), then run yours",
            )
        async with self._lock:
            self._running = by
            try:
                run = PreflightRun(self.commands, self.ctx.clock, self.cfg, request)
                report = await run.run(nodes, self.jobs, epoch, by)
                self.ctx.leadership.require()  # deposed meanwhile: the acks stopped counting; the caller retries
            finally:
                self._running = None
        self.runs += 1
        self.failed_runs += 0 if report.ok else 1
        self.last = report
        return report

    def _nodes(self, request: PreflightRequest) -> list[NodeState]:
        if request.nodes is None:
            ready = sorted((n for n in self.fleet.nodes() if n.liveness == "Ready"), key=lambda n: n.node_id)
            if not ready:
                raise PreflightRefused(
                    "no Ready node to check",
                    "`myoloctl get nodes` shows the fleet; name the nodes to check, or wait for them to report",
                    "nodes",
                )
            return ready
        out = []
        for i, node_id in enumerate(dict.fromkeys(request.nodes)):
            node = self.fleet.node(node_id)
            if node is None:
                raise UnknownPreflightNode(node_id, f"nodes[{i}]")
            out.append(node)
        return out

    def api(self) -> RouteSet:
        return RouteSet(routes.routes(self), self.openapi)

    def stats(self) -> dict[str, int]:
        return {"preflight_runs": self.runs, "preflight_failed_runs": self.failed_runs}

    def status(self) -> dict[str, Any]:
        """The last run's outcome in brief (its rows were the answer to whoever ran it)."""
        last = self.last
        if last is None:
            return {"preflight_last": None}
        keep = ("ok", "passed", "failed", "skipped", "nodes", "checks", "finished", "by")
        return {"preflight_last": {k: msgspec.to_builtins(getattr(last, k)) for k in keep}}
