"""The fault event that tells the fleet the agent's spool lost records: a count, never only a log line."""

from __future__ import annotations

from myolo.agent.spool import SpoolStats
from myolo.events.payloads import NodeFault

_WHY = {
    "over_cap": ("unsent record", "dropped: the spool reached its cap of {cap} bytes while Kafka was away"),
    "corrupt_frames": ("record", "lost to damaged spool frames (disk corruption or a lost file)"),
    "failed_writes": ("event", "the spool could not write (disk full or I/O error)"),
}


def new_losses(now: dict[str, int], reported: dict[str, int]) -> dict[str, int]:
    """The loss counters that grew since the last report, by how much."""
    return {k: v - reported.get(k, 0) for k, v in now.items() if v > reported.get(k, 0)}


def loss_fault(node_id: str, new: dict[str, int], stats: SpoolStats) -> NodeFault:
    """A WARN ``spool`` fault: the node still works, but events it produced are gone and consumers will see a gap."""
    reasons = [f"{_count(n, _WHY[k][0])} {_WHY[k][1].format(cap=stats.max_bytes)}" for k, n in new.items()]
    return NodeFault(
        node_id=node_id,
        kind="spool",
        health="warn",
        reasons=reasons,
        message=f"spool lost {_count(sum(new.values()), 'event')} ({stats.dropped} since the agent started)",
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
