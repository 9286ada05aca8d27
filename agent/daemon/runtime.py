"""Everything a running agent holds (``assemble.py`` builds it from the configuration).

The loops (``loops.py``), the command actions (``actions.py``), the health report (``status.py``) and the
control socket all work on this one object; tests build it with a simulated clock, a simulated backend and a
fake broker and drive the same code the daemon runs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import myolo
from myolo.agent.commands import CommandExecutor
from myolo.agent.config import AgentConfig
from myolo.agent.gpu import GpuBackend
from myolo.agent.health import HealthState
from myolo.agent.kernlog.dedup import XidDedup
from myolo.agent.notify import Notifier
from myolo.agent.publish import Publisher
from myolo.agent.releases.restart import RestartPlan
from myolo.common.clock import Clock
from myolo.events.payloads import FailedRelease, NodeSample

if TYPE_CHECKING:  # imported only where workers are supervised: it brings ZeroMQ in
    from myolo.agent.metrics.exporter import AgentMetrics
    from myolo.agent.profile.profiler import Profiler
    from myolo.agent.trainer.supervisor import Supervisor


@dataclass
class Sampler:
    """The sample loop's state: what it read last (for the health report, STATUS= and the watchdog), and how
    a command asks it for an extra sample or makes a new interval apply at once."""

    seq: int = 0  # of the last sample taken
    ticks: int = 0  # reads tried, successful or not: the watchdog's sign of life
    last_sample: NodeSample | None = None
    last_read_monotonic: float | None = None
    backend_error: str | None = None  # why the last read of the GPUs failed; None once one works
    gpu_levels: dict[int, str] = field(default_factory=dict)  # each GPU's health level at the last sample
    requests: list[asyncio.Future[NodeSample]] = field(default_factory=list)  # waiting for an extra sample
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # an extra sample is asked, or a new interval


@dataclass
class Runtime:
    cfg: AgentConfig  # replaced whole by SIGHUP and by the ``set_interval`` command
    clock: Clock
    backend: GpuBackend
    health: HealthState
    publisher: Publisher
    notifier: Notifier
    config_path: str | None = None  # what SIGHUP reads again (None: defaults and the environment)
    commands: CommandExecutor | None = None  # None when commands are disabled
    trainer: Supervisor | None = None  # the node's training workers; None when commands or the trainer are off
    sampler: Sampler = field(default_factory=Sampler)
    xids: XidDedup = field(default_factory=XidDedup)  # pairs NVML's XIDs with the kernel log's (one fault each)
    metrics: AgentMetrics | None = None  # GET /metrics and the OpenTelemetry instruments; None when off
    profiler: Profiler | None = None  # py-spy on a worker (the profile command); None without workers or when off
    draining: bool = False  # no new trainer workers may start here (set by the ``drain`` command)
    drain_reason: str | None = None
    probe_lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one bandwidth probe at a time
    stop_event: asyncio.Event = field(default_factory=asyncio.Event)  # SIGTERM, SIGINT, or a test
    reload_requested: asyncio.Event = field(default_factory=asyncio.Event)  # SIGHUP
    health_url: str | None = None  # the health endpoint once it listens (``health.port = 0``: the port it got)
    restart: RestartPlan | None = None  # owed once stopped: an upgrade or rollback of the agent (``releases``)
    ready: asyncio.Event = field(default_factory=asyncio.Event)  # READY=1 was sent
    on_trial: str | None = None  # the agent release running on trial until it commits (the launcher's record)
    # releases the node switched back from by itself (the launcher's record, the trainer's trial)
    failed_releases: dict[str, FailedRelease] = field(default_factory=dict)

    @property
    def version(self) -> str:
        return myolo.__version__


def event_source(node_id: str) -> str:
    """CloudEvents ``source`` of everything this agent publishes."""
    return f"/myolo/agent/{node_id}"
