"""The fleet view: every node's latest state, built by applying the agents' events in order.

``apply`` is the ingest hot path (thousands of samples a second): it does no I/O and never raises on
well-formed input. What it cannot accept (implausible values, events about nodes it has never heard of) is
flagged with a reason, on the node when there is one and in ``rejections`` always, and the caller goes on.
Time comes from the caller, taken from the coordinator's clock, so liveness can be replayed in simulation.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import msgspec

from myolo.coordinator.fleet import plausibility
from myolo.coordinator.fleet.model import Cordon, FaultEntry, NodeState
from myolo.events.envelope import Event, event_seconds
from myolo.events.payloads import BandwidthReport, CommandAck, LeakReport, NcclReport, NodeFault, NodeSample

MAX_FAULTS = 50
MAX_NCCL = 32
MAX_LEAKS = 32
MAX_FLAGS = 20
_RANK = {"ok": 0, "warn": 1, "fail": 2}


@dataclass(frozen=True)
class Rejection:
    time: float
    node_id: str
    type: str
    reason: str


@dataclass
class Applied:
    """What ``apply`` did: the node it touched (if any), or why the event was not applied."""

    node: NodeState | None = None
    rejected: str | None = None


@dataclass
class FleetView:
    """Nodes by id. ``accept_unknown_nodes`` lets faults and reports introduce a node (default: only a
    sample, or the durable state, does; a fault for a node nobody knows is more likely garbage).

    ``max_nodes`` bounds memory whatever producers send: a node beyond it is not added; its events are
    flagged (counted in ``refused_nodes``) so a flood of made-up node ids shows instead of growing the view."""

    stale_after_s: float = 10.0
    accept_unknown_nodes: bool = False
    max_nodes: int = 10_000
    nodes_by_id: dict[str, NodeState] = field(default_factory=dict)
    since: dict[str, float] = field(default_factory=dict)  # when each node entered the view
    rejections: deque[Rejection] = field(default_factory=lambda: deque(maxlen=200))
    rejected_total: int = 0
    refused_nodes: int = 0

    # ---- reads -------------------------------------------------------------------------------------------
    def nodes(self) -> list[NodeState]:
        return [self.nodes_by_id[k] for k in sorted(self.nodes_by_id)]

    def node(self, node_id: str) -> NodeState | None:
        return self.nodes_by_id.get(node_id)

    def gpus(self) -> list[dict]:
        """One row per GPU of every node, with the node's id, liveness and cordon state beside it."""
        rows = []
        for n in self.nodes():
            for g in n.gpus:
                row = msgspec.to_builtins(g)
                row.update(node_id=n.node_id, node_liveness=n.liveness, node_cordoned=n.cordoned)
                rows.append(row)
        return rows

    # ---- writes ------------------------------------------------------------------------------------------
    def apply(self, event: Event, now: float) -> Applied:
        data = event.data
        if isinstance(data, NodeSample):
            return self._sample(data, event, now)
        if isinstance(data, NodeFault):
            return self._fault(data, event, now)
        if isinstance(data, NcclReport):
            return self._report(data, event, now, plausibility.check_nccl(data))
        if isinstance(data, LeakReport):
            return self._report(data, event, now, plausibility.check_leak(data))
        if isinstance(data, BandwidthReport):
            node = self.nodes_by_id.get(data.node_id)
            return Applied(node=self.swap(node, bandwidth=data) if node is not None else None)
        if isinstance(data, CommandAck):
            return Applied(node=self.nodes_by_id.get(data.node_id))
        return Applied(rejected=f"type: {event.type} is not something the fleet view keeps")

    def set_cordon(self, cordon: Cordon, now: float) -> NodeState | None:
        """A cordon decision from the state topics (or just written there by this leader). None when the
        node is new and the view is full (the record stays in the state topic)."""
        node = self._get_or_add(cordon.node_id, now)
        return None if node is None else self.swap(node, cordon=cordon)

    def clear_cordon(self, node_id: str) -> NodeState | None:
        node = self.nodes_by_id.get(node_id)
        return None if node is None else self.swap(node, cordon=None)

    def swap(self, node: NodeState, **changes: object) -> NodeState:
        """Put a copy of ``node`` with ``changes`` in its place: readers keep the snapshot they hold."""
        new = msgspec.structs.replace(node, **changes)
        self.nodes_by_id[node.node_id] = new
        return new

    def flag(self, node_id: str, type_: str, reason: str, now: float) -> None:
        self.rejected_total += 1
        self.rejections.append(Rejection(now, node_id, type_, reason))
        node = self.nodes_by_id.get(node_id)
        if node is not None:
            self.swap(node, flags=(*node.flags[-(MAX_FLAGS - 1) :], f"{type_}: {reason}"))

    # ---- internals ---------------------------------------------------------------------------------------
    def _get_or_add(self, node_id: str, now: float) -> NodeState | None:
        node = self.nodes_by_id.get(node_id)
        if node is None:
            if len(self.nodes_by_id) >= self.max_nodes:
                self.refused_nodes += 1
                return None
            node = self.nodes_by_id[node_id] = NodeState(node_id=node_id)
            self.since[node_id] = now
        return node

    def _full(self, node_id: str, event: Event, now: float) -> Applied:
        reason = f"node_id: the fleet view holds its limit of {self.max_nodes} nodes (fleet.max_nodes); not added"
        return self._reject(node_id, event, reason, now)

    def _reject(self, node_id: str, event: Event, reason: str, now: float) -> Applied:
        self.flag(node_id, event.type, reason, now)
        return Applied(node=self.nodes_by_id.get(node_id), rejected=reason)

    def _sample(self, s: NodeSample, event: Event, now: float) -> Applied:
        bad = plausibility.check_sample(s)
        if bad is not None:
            return self._reject(s.node_id, event, bad, now)
        node = self._get_or_add(s.node_id, now)
        if node is None:
            return self._full(s.node_id, event, now)
        sampled = event_seconds(event, now)
        # what the node is now (where it is reachable, its releases' trials) comes from its newest sample: a
        # delayed one (a spool sent late) may predate a restart
        newest = node.last_event_time is None or sampled >= node.last_event_time
        address, health_url = (s.address, s.health_url) if newest else (node.address, node.health_url)
        failed = tuple(s.failed_releases) if newest else node.failed_releases
        on_trial = s.agent_on_trial if newest else node.agent_on_trial
        last_seen, continuous_since, last_event_time = self._alive(node, sampled, now)
        new = self.swap(
            node,
            gpus=tuple(s.gpus),
            health=s.health,
            health_reasons=tuple(s.health_reasons),
            backend=s.backend,
            last_seq=s.seq,
            sample_interval_s=s.interval_s,
            driver_version=s.driver_version or node.driver_version,
            agent_version=s.agent_version or node.agent_version,
            agent_on_trial=on_trial,
            samples_seen=node.samples_seen + 1,
            address=address,
            health_url=health_url,
            failed_releases=failed,
            last_seen=last_seen,
            continuous_since=continuous_since,
            last_event_time=last_event_time,
        )
        return Applied(node=new)

    def _fault(self, f: NodeFault, event: Event, now: float) -> Applied:
        node = self.nodes_by_id.get(f.node_id)
        if node is None and not self.accept_unknown_nodes:
            return self._reject(f.node_id, event, "node_id: no sample or state names this node", now)
        bad = plausibility.check_fault(f, len(node.gpus) if node is not None and node.gpus else None)
        if bad is not None:
            return self._reject(f.node_id, event, bad, now)
        node = self._get_or_add(f.node_id, now)
        if node is None:
            return self._full(f.node_id, event, now)
        # health is raised at once; the next sample says what holds now
        health = f.health if _RANK[f.health] > _RANK[node.health] else node.health
        reasons = node.health_reasons + tuple(
            r for r in dict.fromkeys(f.reasons or [f.kind]) if r not in node.health_reasons
        )
        new = self.swap(
            node,
            recent_faults=(
                *node.recent_faults[-(MAX_FAULTS - 1) :],
                FaultEntry.from_event(f, event_seconds(event, now)),
            ),
            health=health,
            health_reasons=reasons,
        )
        return Applied(node=new)

    def _report(self, r: NcclReport | LeakReport, event: Event, now: float, bad: str | None) -> Applied:
        node = self.nodes_by_id.get(r.node_id)
        if node is None and not self.accept_unknown_nodes:
            return self._reject(r.node_id, event, "node_id: no sample or state names this node", now)
        if bad is not None:
            return self._reject(r.node_id, event, bad, now)
        node = self._get_or_add(r.node_id, now)
        if node is None:
            return self._full(r.node_id, event, now)
        if isinstance(r, NcclReport):
            ident = (r.pid, r.comm_id, r.rank)
            kept = [x for x in node.nccl if (x.pid, x.comm_id, x.rank) != ident]
            new = self.swap(node, nccl=(*kept[-(MAX_NCCL - 1) :], r))
        else:
            ident = (r.subject, r.gpu_index, r.pid)
            kept = [x for x in node.leaks if (x.subject, x.gpu_index, x.pid) != ident]
            new = self.swap(node, leaks=(*kept[-(MAX_LEAKS - 1) :], r))
        return Applied(node=new)

    def _alive(self, node: NodeState, sampled: float, now: float) -> tuple[float, float | None, float]:
        """What a sample taken at ``sampled`` (the node's clock) says about when the node was alive: its new
        ``last_seen``, ``continuous_since`` and ``last_event_time``.

        A fresh sample means alive now (arrival, so a node clock a few seconds off does not matter); a delayed
        one (a backlog after an outage) means alive when it was taken, which is all it can prove. Samples
        closer together than ``stale_after_s`` extend the node's continuous run of samples."""
        fresh = sampled >= now - self.stale_after_s
        alive = now if fresh else sampled
        last = node.last_event_time
        last_seen = alive if node.last_seen is None or alive > node.last_seen else node.last_seen
        new_run = last is None or sampled - last > self.stale_after_s
        return (
            last_seen,
            sampled if new_run else node.continuous_since,
            sampled if last is None or sampled > last else last,
        )
