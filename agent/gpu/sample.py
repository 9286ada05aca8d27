"""One ``NodeSample`` from a backend: what ``myolo-agent sample`` prints and the daemon publishes."""

from __future__ import annotations

from myolo.agent.gpu.backend import GpuBackend
from myolo.agent.health.state import HealthState
from myolo.events.payloads import HostReading, NodeSample


def build_sample(
    backend: GpuBackend,
    node_id: str,
    health: HealthState,
    *,
    seq: int = 0,
    interval_s: float = 1.0,
    host: HostReading | None = None,
    agent_version: str | None = None,
) -> NodeSample:
    """Read every GPU once, judge health (per GPU and node) and wrap it with the node's identity."""
    sample = NodeSample(
        node_id=node_id,
        backend=backend.name,
        gpus=backend.read_all(),
        seq=seq,
        interval_s=interval_s,
        host=host,
        driver_version=backend.driver_version(),
        cuda_version=backend.cuda_version(),
        agent_version=agent_version,
    )
    return health.evaluate_sample(sample)
