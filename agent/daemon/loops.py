"""The agent's periodic and event-driven loops, all on one asyncio loop and one clock.

- ``sample_loop``: read every GPU each interval, judge health, publish the sample (NVLink summarised:
  :mod:`myolo.events.payloads.compact`), and publish a ``health`` fault when a GPU's level changes. Ticks are
  scheduled on absolute times, so a slow read does not drift the cadence; ticks missed while the process was
  stopped are skipped, not replayed.
- ``fault_loop``: driver events (XID, ECC) from the backend's hook, published the moment they arrive.
- ``watchdog_loop``: ``WATCHDOG=1`` only while the sample loop keeps ticking, so a stuck loop gets the
  unit restarted; also ``STATUS=`` lines for ``systemctl status``.
- ``ready``: ``READY=1`` once the first sample is in Kafka (or safely spooled after ``ready_timeout_s``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable

import psutil
import structlog

from myolo.agent.daemon.runtime import Runtime
from myolo.agent.daemon.xid_pairing import nvml_echo
from myolo.agent.health import fault_from_event
from myolo.common.clock import sleep_or_wake
from myolo.events.payloads import HostReading, NodeFault, NodeSample
from myolo.events.payloads.compact import compact_sample

log = structlog.get_logger("myolo.agent.daemon")
Observer = Callable[[NodeSample], None]


async def read_sample(rt: Runtime) -> NodeSample:
    """One sample. NVML calls can block for milliseconds, so they run in a worker thread; the simulator is
    pure computation on the agent's clock and runs inline (deterministic under a simulated clock)."""
    if rt.backend.name == "nvml":
        readings = await asyncio.to_thread(rt.backend.read_all)
    else:
        readings = rt.backend.read_all()
    rt.sampler.seq += 1
    sample = NodeSample(
        node_id=rt.cfg.node_id,
        backend=rt.backend.name,
        gpus=readings,
        seq=rt.sampler.seq,
        interval_s=rt.cfg.sample_interval_s,
        host=host_reading(),
        driver_version=rt.backend.driver_version(),
        cuda_version=rt.backend.cuda_version(),
        agent_version=rt.version,
        workers=rt.trainer.workers() if rt.trainer is not None else None,
        address=rt.cfg.address,
        health_url=rt.health_url,
        agent_on_trial=rt.on_trial,
        failed_releases=list(rt.failed_releases.values()),
    )
    return rt.health.evaluate_sample(sample)


def host_reading() -> HostReading:
    """The node's own CPU and memory: cheap (/proc reads), and context for a GPU reading."""
    vm = psutil.virtual_memory()
    return HostReading(
        cpu_percent=min(100.0, psutil.cpu_percent(interval=None)),
        mem_total_bytes=vm.total,
        mem_used_bytes=vm.total - vm.available,
        load1=round(os.getloadavg()[0], 2),  # as /proc/loadavg prints it: the rest is fixed-point noise
    )


async def sample_loop(rt: Runtime, observers: list[Observer]) -> None:
    """Publish one sample per ``sample_interval_s`` until cancelled. One failed read is logged and counted
    against the NVML check; the loop carries on.

    The loop is woken early (``rt.sampler.wake``) for an extra sample (``request_sample``), which does not
    move the regular ticks, or for a new interval, which applies from the last regular tick at once."""
    clock = rt.clock
    anchor = clock.monotonic()  # when the last regular tick was due
    await _tick(rt, observers)
    while True:
        interval = rt.cfg.sample_interval_s  # read each time: SIGHUP or a command may change it
        due = anchor + interval
        now = clock.monotonic()
        if due < now:  # fell behind (a long read, a suspended process, a shorter interval): skip, don't burst
            due = now + interval - ((now - due) % interval)
        woken = await sleep_or_wake(clock, due - now, rt.sampler.wake)
        rt.sampler.wake.clear()
        if rt.sampler.requests:
            await _tick(rt, observers, extra=True)
        if not woken or clock.monotonic() >= due - 1e-6:
            anchor = due
            await _tick(rt, observers)


async def _tick(rt: Runtime, observers: list[Observer], *, extra: bool = False) -> None:
    waiters, rt.sampler.requests = rt.sampler.requests, []
    try:
        sample = await read_sample(rt)
    except Exception as exc:
        rt.sampler.backend_error = f"reading the GPUs failed: {exc!r}"
        log.exception("sample failed")
        for fut in waiters:
            if not fut.done():
                fut.set_exception(RuntimeError(rt.sampler.backend_error))
    else:
        rt.sampler.backend_error = None
        rt.sampler.last_sample = sample
        rt.sampler.last_read_monotonic = rt.clock.monotonic()
        rt.publisher.publish(compact_sample(sample))  # local readers keep every link's reading
        publish_health_changes(rt, sample)
        for observe in observers:
            try:
                observe(sample)
            except Exception:
                log.exception("sample observer failed", observer=repr(observe))
        for fut in waiters:
            if not fut.done():
                fut.set_result(sample)
        if extra:
            log.info("extra sample published on request", seq=sample.seq)
    rt.sampler.ticks += 1


async def request_sample(rt: Runtime) -> NodeSample:
    """Have the sample loop take (and publish) a full sample now; returns it once published."""
    fut: asyncio.Future[NodeSample] = asyncio.get_running_loop().create_future()
    rt.sampler.requests.append(fut)
    rt.sampler.wake.set()
    return await fut


def publish_health_changes(rt: Runtime, sample: NodeSample) -> None:
    """A GPU whose health level changed (either way) gets a ``health`` fault, so consumers need not diff
    samples to learn that a GPU failed or recovered."""
    for gpu in sample.gpus:
        before = rt.sampler.gpu_levels.get(gpu.index, "ok")
        rt.sampler.gpu_levels[gpu.index] = gpu.health
        if gpu.health == before:
            continue
        fault = NodeFault(
            node_id=rt.cfg.node_id,
            kind="health",
            health=gpu.health,
            reasons=gpu.health_reasons or [f"gpu {gpu.index} recovered ({before} -> ok)"],
            gpu_index=gpu.index,
            gpu_uuid=gpu.uuid,
            message=f"gpu {gpu.index} health {before} -> {gpu.health}",
            simulated=sample.backend == "sim",
        )
        publish_fault(rt, fault)


def publish_fault(rt: Runtime, fault: NodeFault) -> None:
    rt.publisher.publish(fault, urgent=True)
    log.warning("fault published", kind=fault.kind, health=fault.health, gpu=fault.gpu_index, reasons=fault.reasons)


async def fault_loop(rt: Runtime) -> None:
    """Driver events, published at once (not at the next tick), and remembered by the health state; an XID the
    kernel log reported already is not published twice."""
    queue = rt.backend.start_events()
    while True:
        event = await queue.get()
        if nvml_echo(rt, event):
            continue
        finding = rt.health.on_event(event)
        publish_fault(rt, fault_from_event(event, rt.cfg.node_id, finding))


async def ready(rt: Runtime) -> None:
    """READY=1 after the first sample is acknowledged by Kafka, or after ``ready_timeout_s`` with it spooled:
    a node whose broker is down must still start (and spool), not fail its start-up."""
    acked = asyncio.ensure_future(rt.publisher.wait_first_sample())
    timer = asyncio.ensure_future(rt.clock.sleep(rt.cfg.publish.ready_timeout_s))
    try:
        await asyncio.wait([acked, timer], return_when=asyncio.FIRST_COMPLETED)
    finally:
        acked.cancel()
        timer.cancel()
    while rt.sampler.last_sample is None:  # READY means sampling works; wait for it whatever Kafka does
        await rt.clock.sleep(rt.cfg.sample_interval_s / 4)
    rt.notifier.ready(status_line(rt))
    rt.ready.set()
    log.info("ready", status=status_line(rt))


async def watchdog_loop(rt: Runtime, status_every_s: float = 10.0) -> None:
    """Pet the watchdog at a third of its timeout while the sample loop is alive; STATUS= every 10 s."""
    usec = rt.notifier.watchdog_usec
    period = min(status_every_s, usec / 3e6) if usec else status_every_s
    last_ticks, last_progress = rt.sampler.ticks, rt.clock.monotonic()
    last_status, last_status_at = "", 0.0
    while True:
        await rt.clock.sleep(period)
        now = rt.clock.monotonic()
        if rt.sampler.ticks != last_ticks:
            last_ticks, last_progress = rt.sampler.ticks, now
        stalled = now - last_progress > max(3 * rt.cfg.sample_interval_s, period * 2)
        if usec and not stalled:
            rt.notifier.watchdog()
        elif stalled:
            log.error("sample loop stalled: not petting the watchdog", stalled_s=round(now - last_progress, 1))
        line = status_line(rt)
        changed = line.rsplit("; seq", 1)[0] != last_status.rsplit("; seq", 1)[0]
        if changed or now - last_status_at >= 60.0:
            rt.notifier.status(line)
            last_status, last_status_at = line, now


def status_line(rt: Runtime) -> str:
    """What ``systemctl status myolo-agent`` shows."""
    s = rt.sampler.last_sample
    gpus = f"{len(s.gpus)} GPUs ({s.backend}) {s.health}" if s is not None else "no sample yet"
    st = rt.publisher.status
    spool = rt.publisher.spool
    drain = "; draining" if rt.draining else ""
    return f"{gpus}; kafka {st.kafka}; spool {spool.stats().summary()}{drain}; seq {rt.sampler.seq}"


async def cancel_all(tasks: list[asyncio.Task]) -> None:
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
