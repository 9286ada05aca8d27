"""Everything a running agent holds (``assemble.py`` builds it from the configuration).

The loops (``loops.py``), the command actions (``actions.py``), the health report (``status.py``) and the
control socket all work on this one object; tests build it with a simulated clock, a simulated backend and a
fake broker and drive the same code the daemon runs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import agent
from agent.commands import CommandExecutor
from agent.config import AgentConfig
from agent.gpu import GpuBackend
from agent.health import HealthState
from agent.notify import Notifier
from agent.publish import Publisher
from events.clock import Clock
from events.payloads import NodeSample


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
