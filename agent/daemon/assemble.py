"""Assemble a runtime from the configuration: spool, publisher, GPU backend, health rules and, with commands
enabled, the command executor with this daemon's actions.

It sits above ``runtime`` and ``actions`` (the actions work on a runtime, and the executor carries them), so
neither of those needs to import the other. Nothing is started here: :func:`myolo.agent.daemon.main.serve` does that.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from myolo.agent.config import AgentConfig
from myolo.agent.daemon.actions import build_executor
from myolo.agent.daemon.runtime import Runtime, event_source
from myolo.agent.daemon.trainer import build_supervisor
from myolo.agent.gpu import GpuBackend, make_backend
from myolo.agent.health import HealthState
from myolo.agent.identity import node_key
from myolo.agent.kernlog.dedup import XidDedup
from myolo.agent.metrics.exporter import AgentMetrics
from myolo.agent.notify import Notifier
from myolo.agent.profile.profiler import Profiler
from myolo.agent.publish import Publisher
from myolo.agent.publish.publisher import Producer
from myolo.agent.spool import Spool
from myolo.common.clock import Clock
from myolo.events.bus import EventProducer


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
    """The node key is read (or generated) here and, with commands enabled, the key files are read and the
    command ledger opened, so a bad key fails the start (``ConfigError``, ``LedgerError`` or ``OSError``)."""
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
        signer=node_key(cfg.identity),
    )
    rt = Runtime(
        cfg=cfg,
        clock=clock,
        backend=backend or make_backend(cfg.simulate_gpus or None, clock, node_tag=cfg.node_id),
        health=HealthState(clock),
        publisher=publisher,
        notifier=notifier or Notifier.from_env(),
        config_path=config_path,
        xids=XidDedup(cfg.kernel_log.dedup_window_s),
    )
    if (cfg.health.enabled and cfg.health.metrics) or cfg.telemetry.exporter != "none":
        rt.metrics = AgentMetrics(
            publisher, clock, lambda: rt.sampler.last_sample, lambda: rt.sampler.last_read_monotonic
        )
    if cfg.commands.enabled:
        if cfg.trainer.enabled:
            rt.trainer = build_supervisor(rt)
            if cfg.profile.enabled:
                p = cfg.profile
                rt.profiler = Profiler(Path(p.dir), clock, py_spy=p.py_spy, keep=p.keep, max_bytes=p.max_bytes)
        rt.commands = build_executor(rt)
    return rt
