"""Liveness on simulated time: Ready while samples arrive, Suspect after N missed intervals, Lost after
``lost_after_s``; each node's own interval counts."""

from __future__ import annotations

from myolo.common.clock import SimClock
from myolo.coordinator.cordons.records import CordonRecord
from myolo.coordinator.fleet import liveness
from myolo.coordinator.fleet.liveness import LivenessPolicy
from myolo.coordinator.fleet.view import FleetView
from myolo.events.envelope import new_event
from myolo.events.payloads import GpuReading, NodeSample


def feed(view: FleetView, clock: SimClock, node: str, interval: float = 1.0) -> None:
    s = NodeSample(node_id=node, backend="sim", gpus=[GpuReading(index=0, uuid="G", name="sim")], interval_s=interval)
    view.apply(new_event(s, "t", clock=clock), clock.now())


async def test_ready_suspect_lost_on_the_clock() -> None:
    clock, view, policy = SimClock(), FleetView(), LivenessPolicy(lost_after_s=10.0, suspect_after_intervals=3)
    feed(view, clock, "fast")
    feed(view, clock, "slow", interval=5.0)
    seen: list[tuple[float, str, str]] = []
    for _ in range(24):  # a 0.5 s tick for 12 s; "fast" stops sampling after 2 s
        await clock.advance(0.5)
        if clock.monotonic() <= 2.0:
            feed(view, clock, "fast")
        seen += [(clock.monotonic(), t.node.node_id, t.after) for t in liveness.tick(view, policy, clock.now())]
    assert seen == [(5.0, "fast", "Suspect"), (10.0, "slow", "Lost"), (12.0, "fast", "Lost")]


def test_policy_edges() -> None:
    p = LivenessPolicy(lost_after_s=10.0, suspect_after_intervals=3)
    assert p.evaluate(100.0, 1.0, 102.9) == "Ready"
    assert p.evaluate(100.0, 1.0, 103.0) == "Suspect"
    assert p.evaluate(100.0, 1.0, 110.0) == "Lost"
    assert p.evaluate(100.0, 5.0, 109.0) == "Ready"  # a slow node is not suspect after 3 s


def test_node_known_only_from_state_counts_from_when_it_appeared() -> None:
    view, p = FleetView(), LivenessPolicy(lost_after_s=10.0)
    view.set_cordon(CordonRecord(node_id="x", cordoned=True, reason="r", by="operator:a", time=0.0), 50.0)
    assert liveness.tick(view, p, 55.0)[0].after == "Suspect"
    changes = liveness.tick(view, p, 60.0)
    assert changes[0].after == "Lost" and changes[0].silent_s == 10.0
