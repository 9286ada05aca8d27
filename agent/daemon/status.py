"""The agent's health report, from its runtime state (``GET /healthz``) or after a fresh read of the GPUs
(``POST /healthcheck``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from myolo.agent.daemon.runtime import Runtime
from myolo.agent.endpoint.checks import Check, HealthReport, check_gpus, check_kafka, check_nvml, check_spool, report
from myolo.agent.releases.store import current_releases


def current_report(rt: Runtime) -> HealthReport:
    now = rt.clock.monotonic()
    st = rt.publisher.status
    spool = rt.publisher.spool
    age = None if rt.sampler.last_read_monotonic is None else now - rt.sampler.last_read_monotonic
    ack_age = None if st.last_ack_monotonic is None else now - st.last_ack_monotonic
    sample = rt.sampler.last_sample
    checks = {
        "nvml": check_nvml(
            rt.backend.name, rt.backend.device_count(), rt.sampler.backend_error, age, rt.cfg.sample_interval_s
        ),
        "kafka": check_kafka(st.kafka, st.last_error, ack_age, spool.pending),
        "spool": check_spool(spool.stats(), st.spool_error, rt.cfg.health.spool_degraded_fraction),
        "gpus": check_gpus(
            sample.health if sample else None,
            sample.health_reasons if sample else [],
            {g.index: g.health for g in sample.gpus} if sample else {},
        ),
    }
    if rt.commands is not None:
        checks["commands"] = check_commands(rt)
    if rt.trainer is not None:
        checks["workers"] = check_workers(rt)
    return report(rt.cfg.node_id, rt.backend.name, rt.version, checks)


def check_commands(rt: Runtime) -> Check:
    """Present only when commands are enabled. A draining node is ``warn``: healthy, but withdrawn from
    new work, which an operator looking at ``.status`` must see."""
    ex = rt.commands
    assert ex is not None
    data: dict[str, object] = {
        "draining": rt.draining,
        "epoch": ex.ledger.epoch,
        "running": ex.running,
        "done": ex.stats.done,
        "failed": ex.stats.failed,
        "rejected": ex.stats.rejected,
        "releases": current_releases(Path(rt.cfg.releases.dir)),  # None: the component's base install
    }
    if rt.draining:
        why = f" ({rt.drain_reason})" if rt.drain_reason else ""
        return Check(status="warn", detail=f"draining{why}: no new trainer workers start here", data=data)
    return Check(status="ok", detail=f"obeying signed commands, leader epoch {ex.ledger.epoch}", data=data)


def check_workers(rt: Runtime) -> Check:
    """The trainer processes this agent supervises. A job being stopped after a fault is ``warn`` until its
    workers are gone; a node without workers is simply ok."""
    sup = rt.trainer
    assert sup is not None
    workers = sup.workers()
    warm = sup.warm.counts()
    data: dict[str, object] = {"workers": [msgspec.to_builtins(w) for w in workers], "warm": warm}
    faulted = sorted(job.job_id for job in sup.jobs.values() if job.ending == "faulted")
    if faulted:
        return Check(status="warn", detail=f"stopping the workers of faulted job(s) {', '.join(faulted)}", data=data)
    standby = f"; {warm['ready']} warm standby worker(s) ready"
    if not workers:
        return Check(status="ok", detail=f"no training workers{standby}", data=data)
    jobs = sorted({f"{w.job_id} g{w.generation}" for w in workers})
    return Check(status="ok", detail=f"{len(workers)} worker(s) of {', '.join(jobs)}{standby}", data=data)


async def active_report(rt: Runtime) -> HealthReport:
    """Read every GPU now (without disturbing the health rules' baseline) to prove the driver answers."""
    try:
        if rt.backend.name == "nvml":
            readings = await asyncio.wait_for(asyncio.to_thread(rt.backend.read_all), 10.0)
        else:
            readings = rt.backend.read_all()
    except Exception as exc:
        rt.sampler.backend_error = f"active check: reading the GPUs failed: {exc!r}"
    else:
        # a GPU that does not answer shows in the gpus check (from the sample's health rules), not here
        del readings
        rt.sampler.backend_error = None
        rt.sampler.last_read_monotonic = rt.clock.monotonic()
    return current_report(rt)
