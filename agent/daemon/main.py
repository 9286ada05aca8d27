"""The daemon's life: open the GPUs, start every loop and server, run until SIGTERM, then stop cleanly.

Stopping (SIGTERM or SIGINT): ``STOPPING=1``, the loops stop producing, the publisher flushes what Kafka
takes within ``flush_timeout_s`` (the rest stays in the spool for the next start), then the process exits 0.
SIGHUP re-reads the configuration file and applies what can change while running (see ``reload.py``).
A loop that dies of a bug stops the agent with exit code 1 so systemd restarts it (``Restart=on-failure``).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Callable

import msgspec
import structlog

from myolo.agent.control import ControlServer
from myolo.agent.control.inject import apply as apply_injection
from myolo.agent.control.protocol import InjectRequest, Reply, Request
from myolo.agent.daemon import loops, status
from myolo.agent.daemon.actions import KafkaCommandSource, SourceFactory, stop_commands
from myolo.agent.daemon.idle_probe import IdleProbe
from myolo.agent.daemon.kernel_xids import kernel_xid_task
from myolo.agent.daemon.reload import reload_config
from myolo.agent.daemon.runtime import Runtime
from myolo.agent.daemon.trial import commit_release, load_trial
from myolo.agent.daemon.watchers import leak_observer, nccl_task
from myolo.agent.endpoint import ActiveCheck, HealthServer
from myolo.agent.endpoint.logs import JobLogs
from myolo.agent.gpu import GpuBackendError
from myolo.agent.profile.routes import routes as profile_routes

log = structlog.get_logger("myolo.agent.daemon")
EXIT_OK, EXIT_CRASH, EXIT_START = 0, 1, 2


async def serve(
    rt: Runtime,
    *,
    install_signals: bool = True,
    flush_timeout_s: float = 5.0,
    command_source: SourceFactory | None = None,
    idle_probe: IdleProbe | None = None,
) -> int:
    """Run the agent until ``rt.stop_event`` is set (by a signal or a test). Returns the exit code.

    Each resource goes on one exit stack as it is taken, so whichever way serve ends (stopped, a loop's bug,
    a failed start) everything taken is released once, in reverse order: the command consumer first, then
    the loops, the servers, the GPUs and the command ledger, and last the publisher's flush of the spool.

    ``command_source`` (tests) replaces the Kafka consumer of commands; ``idle_probe`` (tests) the scheduled
    probe's runner. Commands are consumed only when ``rt.commands`` exists (``commands.enabled``)."""
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(rt.notifier.close)
        start_sending = await stack.enter_async_context(_publisher(rt, flush_timeout_s))
        if rt.commands is not None:
            stack.push_async_callback(rt.commands.close)
        try:
            rt.backend.open()
        except GpuBackendError as exc:
            log.error("cannot open the GPUs", error=str(exc))
            return _failed_start(rt, exc)
        stack.callback(rt.backend.close)
        try:
            for server in _servers(rt):
                await server.start()
                stack.push_async_callback(server.stop)
                if isinstance(server, HealthServer):
                    rt.health_url = server.url
        except OSError as exc:
            log.error("cannot listen", error=str(exc))
            return _failed_start(rt, exc)
        if rt.metrics is not None and rt.cfg.telemetry.exporter != "none":
            from myolo.agent.metrics.otel import start as start_otel

            stack.push_async_callback(start_otel(rt.metrics, rt.cfg.telemetry, rt.cfg.node_id))
        if rt.trainer is not None:
            rt.trainer.open()
        sending = start_sending()
        load_trial(rt)
        leak = leak_observer(rt)
        probe = idle_probe or IdleProbe(rt)
        observers = [leak, probe] if leak else [probe]
        producing = [
            asyncio.create_task(rt.publisher.sync_loop(), name="spool-fsync"),
            asyncio.create_task(loops.sample_loop(rt, observers), name="samples"),
            asyncio.create_task(loops.fault_loop(rt), name="faults"),
            asyncio.create_task(kernel_xid_task(rt), name="kernel-xids"),
            asyncio.create_task(loops.watchdog_loop(rt), name="watchdog"),
            asyncio.create_task(nccl_task(rt), name="nccl"),
        ]
        if rt.trainer is not None:
            producing.append(asyncio.create_task(rt.trainer.run(), name="trainer"))
        helpers = [asyncio.create_task(loops.ready(rt), name="ready")]
        stack.push_async_callback(loops.cancel_all, helpers + producing)
        stack.push_async_callback(probe.close)
        if rt.trainer is not None:
            # after the command consumer stops (no new work), before the loops: workers never outlive the agent
            stack.push_async_callback(rt.trainer.close)
        essential = [sending, *producing]
        joined = None
        if rt.commands is not None:
            source = (command_source or KafkaCommandSource)(rt, rt.commands)
            consuming = asyncio.create_task(source.run(), name="commands")
            stack.push_async_callback(stop_commands, source, consuming)
            essential.append(consuming)
            joined = source.joined
            log.info("obeying signed coordinator commands", ledger=str(rt.commands.ledger.path))
        stack.push_async_callback(loops.cancel_all, [asyncio.create_task(commit_release(rt, joined), name="commit")])
        if install_signals:
            _install_signals(rt)
            stack.callback(_remove_signals)
        code = await _wait(rt, essential)
        rt.notifier.stopping(f"stopping: flushing {rt.publisher.spool.pending} events")
        log.info("stopping: flushing the spool", pending=rt.publisher.spool.pending)
        return code


def _failed_start(rt: Runtime, exc: Exception) -> int:
    rt.notifier.status(f"failed: {exc}")
    return EXIT_START


def _servers(rt: Runtime) -> list[ControlServer | HealthServer]:
    """The control socket, and the health endpoint (with the workers' logs) unless it is disabled."""
    servers: list[ControlServer | HealthServer] = [
        ControlServer(rt.cfg.control_socket, lambda req: handle_control(rt, req))
    ]
    if rt.cfg.health.enabled:
        servers.append(
            HealthServer(
                lambda: status.current_report(rt),
                ActiveCheck(
                    lambda: status.active_report(rt),
                    lambda: status.current_report(rt),
                    rt.clock,
                    rt.cfg.health.active_min_interval_s,
                ),
                host=rt.cfg.health.host,
                port=rt.cfg.health.port,
                routes=[
                    *JobLogs(rt.trainer).routes(),
                    *(rt.metrics.routes() if rt.metrics else []),
                    *profile_routes(rt.profiler),
                ],
                advertise=rt.cfg.address,
            )
        )
    return servers


@contextlib.asynccontextmanager
async def _publisher(rt: Runtime, flush_timeout_s: float) -> AsyncIterator[Callable[[], asyncio.Task]]:
    """The spool (open since ``build_runtime``) and, once started, the task that sends it to Kafka.

    Leaving closes the spool once: after flushing what Kafka takes within ``flush_timeout_s`` when the sender
    ran; at once when the start failed before it (nothing is sent then)."""
    sender: list[asyncio.Task] = []

    def start() -> asyncio.Task:
        sender.append(asyncio.create_task(rt.publisher.run(), name="publisher"))
        return sender[0]

    try:
        yield start
    finally:
        if sender:
            await rt.publisher.close(flush_timeout_s)
            await loops.cancel_all(sender)
            log.info("stopped", left_in_spool=rt.publisher.spool.pending)
        else:
            rt.publisher.spool.close()


async def _wait(rt: Runtime, essential: list[asyncio.Task]) -> int:
    """Until stop is asked (0) or an essential loop ends, which is a bug (1). SIGHUP reloads meanwhile."""
    stop = asyncio.ensure_future(rt.stop_event.wait())
    try:
        while True:
            reload = asyncio.ensure_future(rt.reload_requested.wait())
            done, _ = await asyncio.wait([stop, reload, *essential], return_when=asyncio.FIRST_COMPLETED)
            if reload in done:
                rt.reload_requested.clear()
                reload_config(rt)
                continue
            reload.cancel()
            if stop in done:
                return EXIT_OK
            for task in done:
                exc = task.exception() if not task.cancelled() else None
                log.error("agent loop ended unexpectedly", loop=task.get_name(), error=repr(exc), exc_info=exc)
            return EXIT_CRASH
    finally:
        stop.cancel()


def handle_control(rt: Runtime, req: Request) -> Reply:
    """The control socket's requests: fault injection (simulated GPUs only) and a status summary (with the
    health endpoint's URL: with ``health.port = 0`` it is how a tool finds the port the agent got)."""
    if isinstance(req, InjectRequest):
        reply = apply_injection(rt.backend, req)
        if req.clear:
            rt.health.clear(req.gpu)  # the operator's word: forget the sticky fault verdicts too
        log.warning("control: fault injection", message=reply.message)
        return reply
    rep = status.current_report(rt)
    return Reply(
        ok=True,
        message=loops.status_line(rt),
        data={
            "status": rep.status,
            "node_id": rt.cfg.node_id,
            "backend": rt.backend.name,
            "seq": rt.sampler.seq,
            "draining": rt.draining,
            "health_url": rt.health_url,
            "workers": [msgspec.to_builtins(w) for w in rt.trainer.workers()] if rt.trainer is not None else [],
        },
    )


def _install_signals(rt: Runtime) -> None:
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, rt.stop_event.set)
    loop.add_signal_handler(signal.SIGINT, rt.stop_event.set)
    loop.add_signal_handler(signal.SIGHUP, rt.reload_requested.set)


def _remove_signals() -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(Exception):
            loop.remove_signal_handler(sig)
