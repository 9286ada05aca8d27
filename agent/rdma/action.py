"""The ``rdma_latency`` action: one ``ib_write_lat`` run, as the server (waits for one client) or the client.

Where the tool is not installed the answer is ``available: false`` with the reason (pre-flight SKIPs), not a
failure. The run is bounded by ``timeout_s``: a server no client reaches is killed and says so.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

import structlog

from myolo.agent.rdma.parse import parse_report
from myolo.agent.trainer.ask import ask
from myolo.events.payloads.commands import RdmaLatencyArgs, RdmaLatencyResult

log = structlog.get_logger("myolo.agent.rdma")
TOOL = "ib_write_lat"


def argv(tool: str, args: RdmaLatencyArgs) -> list[str]:
    cmd = [tool, "-p", str(args.port), "-s", str(args.size), "-n", str(args.iters)]
    if args.device:
        cmd += ["-d", args.device]
    return cmd + ([args.peer] if args.peer else [])


async def run(args: RdmaLatencyArgs, which: Callable[[str], str | None] = shutil.which) -> RdmaLatencyResult:
    tool = which(TOOL)
    if tool is None:
        return RdmaLatencyResult(
            role=args.role, available=False, reason=f"{TOOL} is not installed on this node (perftest package)"
        )
    try:
        answer = await ask(argv(tool, args), args.timeout_s)
    except OSError as exc:
        return RdmaLatencyResult(role=args.role, error=f"{TOOL} cannot start: {exc}")
    if answer is None:
        waited = "no client connected" if args.role == "server" else f"{args.peer} did not answer"
        return RdmaLatencyResult(role=args.role, error=f"{TOOL} ran past {args.timeout_s:g} s: {waited}")
    text = (answer.stdout + answer.stderr).decode(errors="replace")[-20_000:]
    found = parse_report(text)
    if answer.returncode != 0 or found is None:
        tail = " | ".join(line.strip() for line in text.strip().splitlines()[-3:])[:500]
        return RdmaLatencyResult(role=args.role, error=f"{TOOL} exited {answer.returncode}: {tail or 'no output'}")
    log.info("rdma latency measured", role=args.role, peer=args.peer, t_typical_us=found.t_typical_us)
    return RdmaLatencyResult(
        role=args.role,
        size=found.size,
        t_typical_us=found.t_typical_us,
        t_avg_us=found.t_avg_us,
        t_max_us=found.t_max_us,
    )


def rdma_latency_action() -> Callable[..., Any]:
    """The action callable for the executor's table: ``rdma_latency(RdmaLatencyArgs)``."""

    async def rdma_latency(args: RdmaLatencyArgs) -> RdmaLatencyResult:
        return await run(args)

    return rdma_latency
