"""The scheduled bandwidth probe: run the all-reduce sweep now and then, but only while the node is idle.

Why only idle: the sweep saturates NVLink/PCIe/the NICs for seconds, which would slow a trainer and also
measure a shared link instead of the link. Idle means every GPU's utilisation stayed below
``probe.idle_util_pct`` for the last ``probe.idle_samples`` samples (a GPU without a utilisation reading
counts as busy: unknown is not idle). It is a sample observer, so it is driven by the agent's clock through
the sample loop and needs no timer of its own. At most one probe per ``probe.idle_every_s``, measured from
the previous probe's start; never while a commanded probe runs, while the node drains, or while a GPU fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable

import structlog

from myolo.agent.daemon.runtime import Runtime
from myolo.agent.nccl.probe import ProbeSpec, run_probe
from myolo.events.payloads import BandwidthReport, NodeSample

log = structlog.get_logger("myolo.agent.daemon")
ProbeRunner = Callable[[ProbeSpec, float], Awaitable[BandwidthReport]]


def probe_python(rt: Runtime) -> tuple[str, ...]:
    """The interpreter that runs the sweep: ``probe.python``, else the agent's own."""
    return tuple(rt.cfg.probe.python) or (sys.executable,)


def probe_spec(rt: Runtime, gpu_count: int) -> ProbeSpec:
    cfg = rt.cfg.probe
    defaults = ProbeSpec()
    return ProbeSpec(
        world_size=cfg.world_size or max(2, gpu_count),
        backend=cfg.backend,
        sizes=tuple(cfg.sizes) or defaults.sizes,
    )


class IdleProbe:
    """Counts idle samples and starts the probe when the schedule allows. ``runner`` defaults to the real
    subprocess sweep; tests pass their own."""

    def __init__(self, rt: Runtime, runner: ProbeRunner | None = None) -> None:
        self.rt = rt
        self.idle_run = 0
        self.last_start: float | None = None
        self.task: asyncio.Task | None = None
        self.runs = 0
        self.failures = 0
        self._runner = runner or self._subprocess

    def __call__(self, sample: NodeSample) -> None:
        cfg = self.rt.cfg.probe
        if cfg.idle_every_s <= 0:
            self.idle_run = 0
            return
        idle = bool(sample.gpus) and all(g.util_gpu is not None and g.util_gpu < cfg.idle_util_pct for g in sample.gpus)
        self.idle_run = self.idle_run + 1 if idle else 0
        now = self.rt.clock.monotonic()
        if (
            self.idle_run < cfg.idle_samples
            or (self.task is not None and not self.task.done())
            or (self.last_start is not None and now - self.last_start < cfg.idle_every_s)
            or self.rt.probe_lock.locked()
            or self.rt.draining
            or sample.health == "fail"
        ):
            return
        self.last_start = now
        self.task = asyncio.create_task(self._run(probe_spec(self.rt, len(sample.gpus))), name="idle-probe")

    async def _run(self, spec: ProbeSpec) -> None:
        async with self.rt.probe_lock:
            log.info("node idle: running the scheduled bandwidth probe", world_size=spec.world_size)
            try:
                report = await self._runner(spec, self.rt.cfg.probe.timeout_s)
            except Exception as exc:
                self.failures += 1
                log.warning("scheduled bandwidth probe failed", error=str(exc))
                return
        self.runs += 1
        self.rt.publisher.publish(report)

    async def _subprocess(self, spec: ProbeSpec, timeout_s: float) -> BandwidthReport:
        return await run_probe(self.rt.cfg.node_id, spec, timeout_s=timeout_s, python=probe_python(self.rt))

    async def close(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
