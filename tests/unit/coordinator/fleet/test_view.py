"""The fleet view: samples build nodes; implausible records and unknown nodes are flagged, not applied."""

from __future__ import annotations

import pytest

from myolo.common.clock import SimClock
from myolo.coordinator.cordons.records import CordonRecord
from myolo.coordinator.fleet.answers import node_json
from myolo.coordinator.fleet.view import MAX_FLAGS, FleetView
from myolo.events.envelope import new_event
from myolo.events.payloads import GpuReading, LeakReport, NcclReport, NodeFault, NodeSample

CLOCK = SimClock()
NOW = CLOCK.now()


def gpu(i: int, **kw) -> GpuReading:
    return GpuReading(index=i, uuid=f"GPU-{i}", name="sim", **kw)


def ev(payload, clock=CLOCK):
    return new_event(payload, "test", clock=clock)


def sample(node="n1", **kw) -> NodeSample:
    kw.setdefault("gpus", [gpu(0, util_gpu=10.0, mem_total_bytes=100, mem_used_bytes=5), gpu(1)])
    return NodeSample(node_id=node, backend="sim", **kw)


def test_sample_builds_the_node() -> None:
    v = FleetView()
    out = v.apply(ev(sample(seq=7, interval_s=2.0, driver_version="550.1", agent_version="4.0")), NOW)
    n = v.node("n1")
    assert out.rejected is None and out.node is n
    assert (n.last_seen, n.last_seq, n.sample_interval_s, n.samples_seen) == (NOW, 7, 2.0, 1)
    assert n.backend == "sim" and n.driver_version == "550.1" and n.agent_version == "4.0"
    rows = v.gpus()
    assert [r["index"] for r in rows] == [0, 1] and rows[0]["node_id"] == "n1" and rows[0]["util_gpu"] == 10.0


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"gpus": [gpu(0, mem_total_bytes=10, mem_used_bytes=11)]}, "gpus[0].mem_used_bytes"),
        ({"gpus": [gpu(0), gpu(0)]}, "gpus[1].index"),
        ({"gpus": [gpu(0, temp_gpu_c=400.0)]}, "gpus[0].temp_gpu_c"),
        ({"gpus": [gpu(0, power_w=90_000.0)]}, "gpus[0].power_w"),
        ({"gpus": [gpu(0, clock_sm_mhz=99_999)]}, "gpus[0].clock_sm_mhz"),
        ({"gpus": [gpu(i) for i in range(65)]}, "gpus:"),
        ({"interval_s": 0.0}, "interval_s"),
    ],
)
def test_implausible_sample_is_flagged_and_not_applied(kw, field) -> None:
    v = FleetView()
    v.apply(ev(sample()), NOW)
    out = v.apply(ev(sample(**kw)), NOW + 1)
    assert out.rejected is not None and out.rejected.startswith(field)
    n = v.node("n1")
    assert n.samples_seen == 1 and n.last_seen == NOW  # the good sample's state stands
    assert n.flags[-1].endswith(out.rejected) and v.rejected_total == 1 and v.rejections[-1].reason == out.rejected


def test_flags_are_bounded() -> None:
    v = FleetView()
    v.apply(ev(sample()), NOW)
    for _ in range(MAX_FLAGS + 5):
        v.apply(ev(sample(interval_s=0.0)), NOW)
    assert len(v.node("n1").flags) == MAX_FLAGS and v.rejected_total == MAX_FLAGS + 5


def test_fault_raises_health_and_is_kept() -> None:
    v = FleetView()
    v.apply(ev(sample()), NOW)
    v.apply(ev(NodeFault(node_id="n1", kind="xid", health="fail", xid=79, gpu_index=1, reasons=["XID 79"])), NOW)
    n = v.node("n1")
    assert n.health == "fail" and "XID 79" in n.health_reasons
    assert n.recent_faults[-1].xid == 79 and n.recent_faults[-1].gpu_index == 1
    v.apply(ev(NodeFault(node_id="n1", kind="ecc", health="warn")), NOW)
    n = v.node("n1")
    assert n.health == "fail" and "ecc" in n.health_reasons  # a warn never lowers a fail
    v.apply(ev(sample()), NOW + 1)
    n = v.node("n1")
    assert n.health == "ok"  # the next sample says what holds now


def test_fault_for_missing_gpu_or_unknown_node_is_rejected() -> None:
    v = FleetView()
    v.apply(ev(sample()), NOW)
    out = v.apply(ev(NodeFault(node_id="n1", kind="xid", health="fail", gpu_index=5)), NOW)
    assert out.rejected.startswith("gpu_index") and v.node("n1").health == "ok"
    out = v.apply(ev(NodeFault(node_id="ghost", kind="xid", health="fail")), NOW)
    assert out.rejected.startswith("node_id") and v.node("ghost") is None
    assert v.rejections[-1].node_id == "ghost"
    lenient = FleetView(accept_unknown_nodes=True)
    assert lenient.apply(ev(NodeFault(node_id="ghost", kind="xid", health="fail")), NOW).rejected is None
    assert lenient.node("ghost").health == "fail"


def test_reports_replace_per_identity_and_are_checked() -> None:
    v = FleetView()
    v.apply(ev(sample()), NOW)
    for w in ("a", "b"):
        v.apply(ev(NcclReport(node_id="n1", pid=1, rank=0, nranks=2, comm_id="c", warnings=[w])), NOW)
    v.apply(ev(NcclReport(node_id="n1", pid=2, rank=1, nranks=2, comm_id="c")), NOW)
    assert [(r.pid, r.warnings) for r in v.node("n1").nccl] == [(1, ["b"]), (2, [])]
    assert v.apply(ev(NcclReport(node_id="n1", pid=3, rank=2, nranks=2)), NOW).rejected.startswith("rank")
    leak = {"node_id": "n1", "subject": "gpu", "gpu_index": 0, "window_s": 60.0, "samples": 30}
    v.apply(ev(LeakReport(slope_pct_per_h=0.5, lower_pct_per_h=0.4, upper_pct_per_h=0.6, **leak)), NOW)
    assert v.node("n1").leaks[-1].slope_pct_per_h == 0.5
    bad = LeakReport(slope_pct_per_h=5.0, lower_pct_per_h=0.4, upper_pct_per_h=0.6, **leak)
    assert v.apply(ev(bad), NOW).rejected.startswith("slope_pct_per_h") and len(v.node("n1").leaks) == 1


def test_a_replayed_backlog_proves_only_when_the_node_was_alive() -> None:
    old = SimClock(start=NOW - 3600)
    v = FleetView(stale_after_s=10.0)
    v.apply(ev(sample(), clock=old), NOW)
    n = v.node("n1")
    assert n.samples_seen == 1 and n.last_seen == NOW - 3600  # the readings are kept; alive an hour ago
    v.apply(ev(sample()), NOW)
    n = v.node("n1")
    assert n.last_seen == NOW
    skewed = SimClock(start=NOW - 4)  # a fresh sample from a node whose clock is 4 s behind: alive now
    v.apply(ev(sample(), clock=skewed), NOW + 1)
    n = v.node("n1")
    assert n.last_seen == NOW + 1


def test_continuity_follows_the_samples_own_times() -> None:
    v = FleetView(stale_after_s=10.0)
    for t in (0, 5, 14, 23):  # gaps of at most 9 s: one continuous run, whenever the samples arrive
        v.apply(ev(sample(), clock=SimClock(start=NOW + t)), NOW + 30)
    n = v.node("n1")
    assert (n.continuous_since, n.last_event_time) == (NOW, NOW + 23)
    v.apply(ev(sample(), clock=SimClock(start=NOW + 40)), NOW + 40)  # 17 s without a sample: a new run
    n = v.node("n1")
    assert (n.continuous_since, n.last_event_time) == (NOW + 40, NOW + 40)
    v.apply(ev(sample(), clock=SimClock(start=NOW + 30)), NOW + 41)  # late and out of order: ignored
    n = v.node("n1")
    assert (n.continuous_since, n.last_event_time) == (NOW + 40, NOW + 40)


def test_the_nodes_address_and_endpoint_come_from_its_newest_sample() -> None:
    v = FleetView(stale_after_s=10.0)
    at = {"address": "10.0.0.7", "health_url": "http://10.0.0.7:8080"}
    v.apply(ev(sample(**at), clock=SimClock(start=NOW)), NOW)
    n = v.node("n1")
    assert (n.address, n.health_url) == ("10.0.0.7", "http://10.0.0.7:8080")
    body = node_json(n, NOW)
    assert (body["address"], body["health_url"]) == ("10.0.0.7", "http://10.0.0.7:8080")
    moved = {"address": "10.0.0.8", "health_url": "http://10.0.0.8:9000"}
    v.apply(ev(sample(**moved), clock=SimClock(start=NOW + 5)), NOW + 5)
    v.apply(ev(sample(**at), clock=SimClock(start=NOW + 2)), NOW + 6)  # a late sample from before the move
    n = v.node("n1")
    assert (n.address, n.health_url, n.samples_seen) == ("10.0.0.8", "http://10.0.0.8:9000", 3)
    v.apply(ev(sample(), clock=SimClock(start=NOW + 7)), NOW + 7)  # an agent that does not say
    n = v.node("n1")
    assert (n.address, n.health_url) == (None, None)
    assert (node_json(n, NOW + 7)["address"], node_json(n, NOW + 7)["health_url"]) == (None, None)


def test_cordon_from_state_creates_the_node() -> None:
    v = FleetView()
    rec = CordonRecord(node_id="n9", cordoned=True, reason="r", by="operator:a", time=NOW)
    n = v.set_cordon(rec, NOW)
    assert n.cordoned and not n.schedulable and v.since["n9"] == NOW


def test_nodes_beyond_the_limit_are_flagged_not_kept() -> None:
    v = FleetView(max_nodes=2)
    for name in ("a", "b", "c", "d"):
        v.apply(ev(sample(node=name)), NOW)
    assert sorted(v.nodes_by_id) == ["a", "b"] and v.refused_nodes == 2
    assert v.rejected_total == 2 and "fleet.max_nodes" in v.rejections[-1].reason
    assert v.apply(ev(sample(node="a")), NOW + 1).rejected is None  # known nodes still update
    assert v.set_cordon(CordonRecord(node_id="z", cordoned=True, reason="r", by="auto:lost", time=0.0), NOW) is None


def test_a_node_held_elsewhere_is_a_snapshot_nobody_can_change() -> None:
    v = FleetView()
    v.apply(ev(sample()), NOW)
    held = v.node("n1")
    v.apply(ev(NodeFault(node_id="n1", kind="xid", health="fail", xid=79, gpu_index=1, reasons=["XID 79"])), NOW)
    v.set_cordon(CordonRecord(node_id="n1", cordoned=True, reason="r", by="operator:a", time=NOW), NOW)
    assert (held.health, held.recent_faults, held.cordon) == ("ok", (), None)  # what it was when read
    now = v.node("n1")
    assert now.health == "fail" and now.cordoned and now.samples_seen == held.samples_seen
    with pytest.raises(AttributeError):
        now.health = "ok"  # type: ignore[misc]
    assert isinstance(now.health_reasons, tuple) and isinstance(now.gpus, tuple)
