"""The ``rdma_latency`` action: one ``ib_write_lat`` run, as the server (waits for one client) or the client.

Where the tool is not installed the answer is ``available: false`` with the reason (pre-flight SKIPs), not a
failure. The run is bounded by ``timeout_s``: a server no client reaches is killed and says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Callable
from typing import Any

import structlog

from agent.rdma.parse import parse_report
from events.payloads.commands import RdmaLatencyArgs, RdmaLatencyResult

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
        proc = await asyncio.create_subprocess_exec(
            *argv(tool, args), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
    except OSError as exc:
        return RdmaLatencyResult(role=args.role, error=f"{TOOL} cannot start: {exc}")
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), args.timeout_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        waited = "no client connected" if args.role == "server" else f"{args.peer} did not answer"
        return RdmaLatencyResult(role=args.role, error=f"{TOOL} ran past {args.timeout_s:g} s: {waited}")
    text = out.decode(errors="replace")[-20_000:]
    found = parse_report(text)
    if proc.returncode != 0 or found is None:
        tail = " | ".join(line.strip() for line in text.strip().splitlines()[-3:])[:500]
        return RdmaLatencyResult(role=args.role, error=f"{TOOL} exited {proc.returncode}: {tail or 'no output'}")
    log.info("rdma latency measured", role=args.role, peer=args.peer, t_typical_us=found.t_typical_us)
    return RdmaLatencyResult(
        role=args.role,
        size=found.size,
        t_typical_us=found.t_typical_us,
        t_avg_us=found.t_avg_us,
        t_max_us=found.t_max_us,
    )


def rdma_latency_action() -> Callable[..., Any]:
    """The action callable for the executor's table: ``rdma_latency(args=RdmaLatencyArgs)``."""

    async def rdma_latency(args: RdmaLatencyArgs) -> RdmaLatencyResult:
        return await run(args)

    return rdma_latency
