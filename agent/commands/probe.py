"""The ``nccl_probe`` action: run the bandwidth sweep (``myolo.agent.nccl.probe``) and publish its report.

The full :class:`BandwidthReport` goes on the reports topic (tagged with the command id, so the coordinator
can join it to the command); the ack carries a summary, small enough to keep in the ledger.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from myolo.agent.commands.args import current_command_id
from myolo.agent.nccl.probe import ProbeSpec, run_probe
from myolo.events.payloads import BandwidthReport, Payload
from myolo.events.payloads.commands import NcclProbeArgs, NcclProbeResult

_PROBE = ProbeSpec()  # its defaults (a slots dataclass has no class-level default values)


def nccl_probe_action(
    node_id: str,
    publish: Callable[[Payload], object],
    *,
    python: Sequence[str] = (sys.executable,),
    cwd: str | None = None,
    env: dict[str, str] | None = None,
) -> Callable[..., Any]:
    """The action callable for the executor's table. ``publish`` is e.g. the daemon's ``publisher.publish``."""

    async def nccl_probe(args: NcclProbeArgs) -> NcclProbeResult:
        report = await run_probe(
            node_id,
            probe_spec(args),
            timeout_s=args.timeout_s,
            python=python,
            cwd=cwd,
            env=env,
            command_id=current_command_id(),
        )
        publish(report)
        return summary(report)

    return nccl_probe


def probe_spec(args: NcclProbeArgs) -> ProbeSpec:
    """The sweep the command asks for; what it leaves out is the probe's default."""
    return ProbeSpec(
        world_size=args.world_size,
        backend=args.backend,
        sizes=tuple(args.sizes) if args.sizes is not None else _PROBE.sizes,
        warmup=args.warmup if args.warmup is not None else _PROBE.warmup,
        iters=args.iters if args.iters is not None else _PROBE.iters,
        dtype=args.dtype or _PROBE.dtype,
    )


def summary(report: BandwidthReport) -> NcclProbeResult:
    peak = max(report.points, key=lambda p: p.busbw_gbps)
    return NcclProbeResult(
        backend=report.backend,
        world_size=report.world_size,
        points=len(report.points),
        peak_busbw_gbps=round(peak.busbw_gbps, 3),
        peak_size_bytes=peak.size_bytes,
    )
