"""What each coordinator command does to the running agent, and the Kafka consumer that feeds the executor.

The executor (``myolo.agent.commands``) decides *whether* a command runs (signature, epoch fence, once per id);
this module says *what* each action does to the live agent:

- ``set_interval``: the sample loop's interval, applied at once (the loop is woken, not left sleeping out
  the old interval). A later SIGHUP applies the file's value again: the operator's latest word wins.
- ``report_sample``: the sample loop takes one extra full sample now and publishes it; the ack carries its seq.
- ``nccl_probe``: the bandwidth sweep (``myolo.agent.commands.probe``), never concurrent with the scheduled one.
- ``drain``: marks the node draining (no new trainer workers start here; shown by /healthz and STATUS=) and
  stops the local workers as ``stop_workers`` does (checkpoint first). Not persisted: a restarted agent
  starts undrained and the coordinator re-sends it for a cordoned node.
- ``start_workers`` / ``stop_workers``: the training supervisor (``myolo.agent.daemon.trainer``).
- ``upgrade`` / ``rollback``: blue-green releases of the agent or the trainer (``myolo.agent.daemon.releases``); the
  agent restarts into the new version after the ack.
- ``hash_files``: SHA-256 of files on the node (``myolo.agent.commands.hash_files``), read in a thread.
- ``check_tfrecords``: every record of TFRecord files on the node (``myolo.agent.tfrecord``), read in a thread.
- ``runtime_versions``: the trainer interpreter's CUDA/cuDNN beside the driver's (``myolo.agent.trainer.versions``).
- ``rdma_latency``: one ``ib_write_lat`` run, server or client (``myolo.agent.rdma``).
- ``profile``: py-spy on one trainer worker for a bounded time (``myolo.agent.profile``); the agent keeps the stacks
  for ``GET /v1/profiles/{id}``.

The consumer runs as one task; when Kafka is away it retries with back-off (the agent keeps sampling and
spooling meanwhile). Acks go through the spool (``SpooledAcks``), so they survive an outage too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Protocol

import msgspec
import structlog

from myolo.agent.commands import (
    ActionFn,
    CommandExecutor,
    SpooledAcks,
    build_command_consumer,
    commands_state_dir,
    load_verifier,
    nccl_probe_action,
)
from myolo.agent.commands.hash_files import hash_files_action
from myolo.agent.daemon.idle_probe import probe_python
from myolo.agent.daemon.loops import request_sample
from myolo.agent.daemon.releases import NodeReleases
from myolo.agent.daemon.runtime import Runtime, event_source
from myolo.agent.daemon.trainer import trainer_actions, trainer_admissions, trainer_python, worker_env
from myolo.agent.profile.action import profile_action
from myolo.agent.rdma.action import rdma_latency_action
from myolo.agent.tfrecord.action import check_tfrecords_action
from myolo.agent.trainer.versions import runtime_versions_action
from myolo.common.clock import sleep_or_wake
from myolo.events.bus import EventConsumer, EventProducer
from myolo.events.payloads.commands import (
    DrainArgs,
    DrainResult,
    NcclProbeArgs,
    NcclProbeResult,
    ReportSampleArgs,
    ReportSampleResult,
    SetIntervalArgs,
    SetIntervalResult,
    StopWorkersResult,
)

log = structlog.get_logger("myolo.agent.daemon")
RETRY_MIN_S, RETRY_MAX_S = 1.0, 30.0
STOP_TIMEOUT_S = 5.0


class CommandSource(Protocol):
    """Feeds commands to the executor until stopped: the Kafka consumer, or an in-memory one in tests."""

    async def run(self) -> None: ...
    async def stop(self) -> None: ...
    def joined(self) -> bool:
        """Whether commands can reach the agent now (the consumer has its partition)."""
        ...


SourceFactory = Callable[[Runtime, CommandExecutor], CommandSource]


def daemon_actions(rt: Runtime, releases: NodeReleases | None = None) -> dict[str, ActionFn]:
    """The action table for :class:`CommandExecutor`, bound to this runtime: a handler for every action of
    ``myolo.events.payloads.commands.ACTIONS`` (the trainer's and ``profile`` only with a trainer, and a
    profiler, configured), each called with its action's args Struct."""

    async def set_interval(args: SetIntervalArgs) -> SetIntervalResult:
        previous = rt.cfg.sample_interval_s
        rt.cfg = msgspec.structs.replace(rt.cfg, sample_interval_s=args.interval_s)
        rt.sampler.wake.set()
        log.info("command: sample interval changed", interval_s=args.interval_s, previous_s=previous)
        return SetIntervalResult(interval_s=args.interval_s, previous_s=previous)

    async def report_sample(_: ReportSampleArgs) -> ReportSampleResult:
        sample = await request_sample(rt)
        return ReportSampleResult(seq=sample.seq, health=sample.health, gpus=len(sample.gpus))

    probe = nccl_probe_action(rt.cfg.node_id, rt.publisher.publish, python=probe_python(rt))

    async def nccl_probe(args: NcclProbeArgs) -> NcclProbeResult:
        async with rt.probe_lock:
            return await probe(args)

    async def drain(args: DrainArgs) -> DrainResult:
        set_draining(rt, args.draining, args.reason)
        stopped: list[StopWorkersResult] = []
        if args.draining and rt.trainer is not None:
            stopped = await rt.trainer.stop_all(f"drain: {args.reason or 'no reason given'}", checkpoint=True)
        return DrainResult(draining=rt.draining, stopped=stopped)

    actions = {"set_interval": set_interval, "report_sample": report_sample, "nccl_probe": nccl_probe, "drain": drain}
    actions["hash_files"] = hash_files_action()
    actions["check_tfrecords"] = check_tfrecords_action()
    actions["runtime_versions"] = runtime_versions_action(
        rt.backend, lambda: trainer_python(rt), lambda: worker_env(rt), lambda: rt.cfg.trainer.workers_dir
    )
    actions["rdma_latency"] = rdma_latency_action()
    actions.update((releases or NodeReleases(rt)).actions())
    if rt.trainer is not None:
        actions.update(trainer_actions(rt.trainer))
        if rt.profiler is not None:
            actions["profile"] = profile_action(rt.trainer.workers, rt.profiler)[1]
    return actions


def set_draining(rt: Runtime, draining: bool, reason: str | None = None) -> None:
    if draining != rt.draining:
        log.warning("node draining" if draining else "drain lifted", node_id=rt.cfg.node_id, reason=reason)
    rt.draining = draining
    rt.drain_reason = reason if draining else None


def build_executor(rt: Runtime) -> CommandExecutor:
    """Read the trusted keys and open the ledger (``ConfigError``/``OSError`` here fail the start)."""
    cfg = rt.cfg.commands
    releases = NodeReleases(rt)
    admissions = releases.admissions()
    if rt.trainer is not None:
        admissions.update(trainer_admissions(rt, rt.trainer, releases.trainer_trial))
        if rt.profiler is not None:
            admissions["profile"] = profile_action(rt.trainer.workers, rt.profiler)[0]
    return CommandExecutor(
        rt.cfg.node_id,
        commands_state_dir(cfg, rt.cfg.data_dir),
        load_verifier(cfg),
        SpooledAcks(rt.publisher),
        daemon_actions(rt, releases),
        rt.clock,
        max_ids=cfg.max_remembered,
        max_age_s=cfg.max_age_s or None,
        admissions=admissions,
    )


class KafkaCommandSource:
    """The node's consumer of ``myolo.commands``, restarted with back-off whenever Kafka fails it."""

    def __init__(self, rt: Runtime, executor: CommandExecutor) -> None:
        self._rt = rt
        self._executor = executor
        self._consumer: EventConsumer | None = None
        self._stopping = asyncio.Event()
        self.restarts = 0

    async def run(self) -> None:
        rt, delay = self._rt, RETRY_MIN_S
        while not self._stopping.is_set():
            # dead letters (a forged or malformed command) are sent directly: they matter only with Kafka up
            dead_letters = EventProducer(rt.cfg.kafka, source=event_source(rt.cfg.node_id), clock=rt.clock)
            self._consumer = build_command_consumer(
                rt.cfg.kafka, rt.cfg.node_id, self._executor, dead_letters=dead_letters
            )
            try:
                await dead_letters.start()
                await self._consumer.run()
                delay = RETRY_MIN_S
            except Exception as exc:
                self.restarts += 1
                log.warning("commands: consumer failed; retrying", error=repr(exc), retry_in_s=delay)
            finally:
                self._consumer = None
                with contextlib.suppress(Exception):
                    await dead_letters.stop()
            if self._stopping.is_set():
                return
            await sleep_or_wake(rt.clock, delay, self._stopping)
            delay = min(delay * 2, RETRY_MAX_S)

    async def stop(self) -> None:
        self._stopping.set()
        if self._consumer is not None:
            await self._consumer.stop()

    def joined(self) -> bool:
        return self._consumer is not None and self._consumer.ready.is_set()


async def stop_commands(source: CommandSource, task: asyncio.Task) -> None:
    """Graceful stop of the consumer: it commits and leaves (cancelled if it does not within
    ``STOP_TIMEOUT_S``). The executor is closed apart (``CommandExecutor.close``): running actions are
    cancelled (recorded as failed, never re-run), and the acks already written wait in the spool for the
    publisher's final flush."""
    await source.stop()
    done, _ = await asyncio.wait([task], timeout=STOP_TIMEOUT_S)
    if not done:
        log.warning("commands: consumer did not stop in time; cancelling it", timeout_s=STOP_TIMEOUT_S)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
