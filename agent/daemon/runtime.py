"""Everything a running agent holds, built once from the configuration.

The loops (``loops.py``), the health report (``status.py``) and the control socket all work on this one
object; tests build it with a simulated clock, a simulated backend and a fake broker and drive the same code
the daemon runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import agent
from agent.config import AgentConfig
from agent.gpu import GpuBackend, make_backend
from agent.health import HealthState
from agent.notify import Notifier
from agent.publish import Publisher
from agent.publish.publisher import Producer
from agent.spool import Spool
from events.bus import EventProducer
from events.clock import Clock
from events.payloads import NodeSample

if TYPE_CHECKING:
    from agent.commands import CommandExecutor


@dataclass
class Runtime:
    cfg: AgentConfig
    clock: Clock
    backend: GpuBackend
    health: HealthState
    publisher: Publisher
    notifier: Notifier
    config_path: str | None = None
    backend_error: str | None = None
    last_sample: NodeSample | None = None
    last_read_monotonic: float | None = None
    ticks: int = 0
    seq: int = 0
    faults_published: int = 0
    gpu_levels: dict[int, str] = field(default_factory=dict)
    stop_event: asyncio.Event = field(default_factory=asyncio.Event)
    reload_requested: asyncio.Event = field(default_factory=asyncio.Event)
    extras: dict[str, object] = field(default_factory=dict)  # counters of the NCCL and leak wiring
    # coordinator commands (None when commands are disabled) and what they change in the running agent
    commands: CommandExecutor | None = None
    draining: bool = False  # no new trainer workers may start here (set by the ``drain`` command)
    drain_reason: str | None = None
    sample_requests: list[asyncio.Future[NodeSample]] = field(default_factory=list)  # report_sample waiters
    sampler_wake: asyncio.Event = field(default_factory=asyncio.Event)  # an extra sample or a new interval
    probe_lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one bandwidth probe at a time

    @property
    def source(self) -> str:
        return self.publisher.source

    @property
    def version(self) -> str:
        return agent.__version__


def event_source(node_id: str) -> str:
    """CloudEvents ``source`` of everything this agent publishes."""
    return f"/myolo/agent/{node_id}"


def kafka_producer_factory(cfg: AgentConfig, clock: Clock) -> Callable[[], Producer]:
    """A fresh :class:`EventProducer` per connection attempt; its request timeout bounds one send."""
    cfg.kafka.client_kwargs()  # fail now, naming the key, if the Kafka settings are unusable

    def make() -> Producer:
        return EventProducer(
            cfg.kafka,
            source=event_source(cfg.node_id),
            clock=clock,
            request_timeout_ms=int(cfg.publish.send_timeout_s * 1000),
        )

    return make


def build_runtime(
    cfg: AgentConfig,
    clock: Clock,
    *,
    backend: GpuBackend | None = None,
    producer_factory: Callable[[], Producer] | None = None,
    notifier: Notifier | None = None,
    config_path: str | None = None,
) -> Runtime:
    """Assemble the agent. Nothing is started: :func:`agent.daemon.main.serve` does that. With commands
    enabled the key files are read and the command ledger opened here, so a bad key fails the start."""
    spool = Spool(
        cfg.spool.dir,
        max_bytes=cfg.spool.max_bytes,
        segment_bytes=cfg.spool.segment_bytes,
        fsync=cfg.spool.fsync,
        fsync_interval_s=cfg.spool.fsync_interval_s,
        clock=clock,
    )
    publisher = Publisher(
        spool,
        producer_factory or kafka_producer_factory(cfg, clock),
        source=event_source(cfg.node_id),
        node_id=cfg.node_id,
        clock=clock,
        config=cfg.publish,
    )
    rt = Runtime(
        cfg=cfg,
        clock=clock,
        backend=backend or make_backend(cfg.simulate_gpus or None, clock, node_tag=cfg.node_id),
        health=HealthState(clock),
        publisher=publisher,
        notifier=notifier or Notifier.from_env(),
        config_path=config_path,
    )
    if cfg.commands.enabled:
        from agent.daemon.commands import build_executor  # it needs the runtime; imported late (cycle)

        rt.commands = build_executor(rt)
    return rt
