"""Wiring of the NCCL log watch and the leak detector into the running agent.

Leaks: the detector is a sample observer; it reports on its own cadence (``leak.report_interval_s``) and at
once when an alert starts or ends, so it needs no task of its own.

NCCL: every ``nccl.poll_interval_s`` the configured globs are expanded; each new file gets a follower and a
tracker of its own (a trainer process per file, as ``NCCL_DEBUG_FILE=...%p`` writes them), and every report
or fault is published the moment its line is read. Files are capped (``MAX_FOLLOWED``) so a glob that
matches thousands of stale logs cannot grow the agent; a file that disappears stops being followed.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
from collections.abc import Callable
from pathlib import Path

import structlog

from myolo.agent.daemon.loops import publish_fault
from myolo.agent.daemon.runtime import Runtime
from myolo.agent.daemon.trainer import nccl_globs
from myolo.agent.leak.detector import LeakDetector
from myolo.agent.leak.rss import host_total_bytes, read_rss
from myolo.agent.nccl.follow import FileFollower
from myolo.agent.nccl.tracker import NcclTracker
from myolo.agent.nccl.watch import watch_lines
from myolo.events.payloads import NcclReport, NodeFault, NodeSample

log = structlog.get_logger("myolo.agent.daemon")
MAX_FOLLOWED = 256


def emit_nccl(rt: Runtime, payload: NcclReport | NodeFault) -> None:
    if isinstance(payload, NodeFault):
        publish_fault(rt, payload)
    else:
        rt.publisher.publish(payload)


async def nccl_task(rt: Runtime) -> None:
    """Discover and follow NCCL logs until cancelled (idles when no globs are configured)."""
    followed: dict[Path, asyncio.Task] = {}
    try:
        while True:
            for path in _matches(nccl_globs(rt)):
                if path in followed or len(followed) >= MAX_FOLLOWED:
                    continue
                followed[path] = asyncio.create_task(_follow(rt, path), name=f"nccl:{path}")
                log.info("following NCCL log", path=str(path))
            for path in [p for p, t in followed.items() if t.done() or not p.exists()]:
                followed.pop(path).cancel()
            await rt.clock.sleep(rt.cfg.nccl.poll_interval_s)
    finally:
        for task in followed.values():
            task.cancel()
        for task in followed.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _matches(globs: list[str]) -> list[Path]:
    out: list[Path] = []
    for pattern in globs:
        out.extend(Path(p) for p in sorted(glob.glob(pattern)))
    return out


def log_owner(path: Path, workers_dir: Path) -> tuple[str | None, int | None]:
    """(job, generation) of a worker's NCCL log the agent placed (``<workers_dir>/<job>/g<N>/nccl-rank-R.log``);
    (None, None) for any other log."""
    try:
        job, gen, _ = path.relative_to(workers_dir).parts
    except ValueError:
        return None, None
    return (job, int(gen[1:])) if gen[:1] == "g" and gen[1:].isdigit() else (None, None)


async def _follow(rt: Runtime, path: Path) -> None:
    follower = FileFollower(path, rt.clock, poll_s=rt.cfg.nccl.poll_interval_s, from_start=True)
    job, generation = log_owner(path, Path(rt.cfg.trainer.workers_dir))
    tracker = NcclTracker(rt.cfg.node_id, job_id=job, generation=generation)
    try:
        await watch_lines(follower.lines(), tracker, lambda p: emit_nccl(rt, p), rt.clock)
    except Exception:
        log.exception("NCCL log follower stopped", path=str(path))
    finally:
        follower.close()


def leak_observer(rt: Runtime) -> Callable[[NodeSample], None] | None:
    """Feed every sample (and, on real GPUs, the trainers' host RSS) to the leak detector; publish its reports
    and faults at once. None when leak detection is disabled."""
    if not rt.cfg.leak.enabled:
        return None
    detector = LeakDetector(rt.cfg.node_id, rt.cfg.leak)

    def observe(sample: NodeSample) -> None:
        now = rt.clock.now()
        detector.config = rt.cfg.leak  # SIGHUP may have changed the threshold or the cadence
        out = detector.observe(sample, now)
        if sample.backend == "nvml":  # simulated pids are not real processes of this host
            pids = {p.pid for g in sample.gpus for p in g.processes or []}
            if pids:
                out += detector.observe_rss(read_rss(pids), host_total_bytes(), now)
        for payload in out:
            if isinstance(payload, NodeFault):
                publish_fault(rt, payload)
            else:
                rt.publisher.publish(payload)

    return observe
