"""A coordinator's ``GET /metrics`` page, from the real core and components without a broker: every
coordinator metric of the mapping file is served by someone, a fault's cordon is timed, and a component's bug
or a wrong name costs only its own series."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from prometheus_client.parser import text_string_to_metric_families

from myolo.common.clock import SimClock
from myolo.common.metrics.mapping import load
from myolo.coordinator.cordons.component import Cordons
from myolo.coordinator.core.leadership import LeaderTerm
from myolo.coordinator.core.metrics import CoordinatorMetrics
from myolo.coordinator.jobs.manifest import parse_manifest
from myolo.coordinator.jobs.records import Decision, JobRecord, JobSpec, JobStatus, with_status
from myolo.coordinator.jobs.series import new_decisions
from myolo.events.bus import RecordInfo
from myolo.events.envelope import new_event
from myolo.events.payloads import GpuReading, NodeFault, NodeSample
from tests.support.coordinator.jobs_sim import manifest
from tests.support.coordinator.offline import offline_coordinator
from tests.support.coordinator.recorder import recording_producers

INFO = RecordInfo("t", 0, 0)


def _samples(text: str) -> list:
    return [s for f in text_string_to_metric_families(text) for s in f.samples]


async def test_every_coordinator_metric_is_served_and_a_faults_cordon_is_timed(tmp_path) -> None:
    clock = SimClock()
    _, producers = recording_producers()
    coord = offline_coordinator(tmp_path, clock=clock, producers=producers)
    provided = set(coord.core_metrics())
    for comp in coord.peers:
        provided |= set(comp.metrics())
    assert provided == {m.name for m in load().for_component("coordinator")}

    await coord.assume_term(LeaderTerm(epoch=7, instance_id="me", started=0.0))
    cordons = coord.get(Cordons)
    writer = asyncio.create_task(cordons.writer.run())
    for n in ("n1", "n2"):
        sample = NodeSample(node_id=n, backend="sim", gpus=[GpuReading(index=0, uuid=f"G-{n}", name="sim")])
        await coord.router(new_event(sample, f"/myolo/agent/{n}", clock=clock), INFO)
    fault = new_event(NodeFault(node_id="n1", kind="xid", health="fail", xid=79), "/myolo/agent/n1", clock=clock)
    await clock.advance(0.3)  # the fault reaches the coordinator 0.3 s after the node saw it
    await coord.router(fault, INFO)
    for _ in range(50):
        await asyncio.sleep(0)
    writer.cancel()

    samples = _samples(coord.metrics_text())
    by_name: dict[str, list] = {}
    for s in samples:
        by_name.setdefault(s.name, []).append(s)
    assert {s.labels["member"] for s in samples} == {"me"}
    assert [s.value for s in by_name["myolo_coordinator_leader"]] == [1.0]
    assert [s.value for s in by_name["myolo_coordinator_epoch"]] == [7.0]
    nodes = {(s.labels["liveness"], s.labels["health"]): s.value for s in by_name["myolo_nodes"]}
    assert nodes[("Ready", "fail")] == 1 and nodes[("Ready", "ok")] == 1
    assert {s.labels["author"]: s.value for s in by_name["myolo_cordons"]}["auto:fault"] == 1
    buckets = {s.labels["le"]: s.value for s in by_name["myolo_fault_to_cordon_seconds_bucket"]}
    assert buckets["0.25"] == 0 and buckets["0.5"] == 1 and buckets["+Inf"] == 1
    # the event's time has microseconds (RFC 3339), the simulated clock float seconds
    assert by_name["myolo_fault_to_cordon_seconds_sum"][0].value == pytest.approx(0.3, abs=1e-5)
    assert {s.labels["phase"]: s.value for s in by_name["myolo_jobs"]}["Running"] == 0


def test_a_components_bug_or_a_wrong_name_costs_only_its_own_series() -> None:
    def broken() -> dict:
        raise RuntimeError("bug")

    metrics = CoordinatorMetrics(
        "m1",
        [
            ("good", lambda: {"myolo_coordinator_leader": [((), 1.0)]}),
            ("typo", lambda: {"myolo_coordinatr_leader": [((), 1.0)], "myolo_jobs": [((), 2.0)]}),
            ("broken", broken),
        ],
    )
    text = metrics.render()
    assert 'myolo_coordinator_leader{member="m1"} 1' in text
    assert "myolo_coordinatr_leader" not in text and "myolo_jobs" not in text  # no such name; wrong label count


def test_the_decisions_a_record_adds_are_those_after_the_previous_newest() -> None:
    spec = parse_manifest(manifest())
    base = JobRecord(name=spec.name, created=0.0, spec=JobSpec(job=spec), status=JobStatus(updated=0.0))
    d = [Decision(time=float(t), kind="start" if t == 0 else "restart", reason=f"r{t}") for t in range(5)]
    first = with_status(base, decisions=d[:2])
    assert new_decisions(None, first) == d[:2]
    assert new_decisions(first, with_status(base, decisions=d[:4])) == d[2:4]
    assert new_decisions(first, with_status(base, decisions=d[1:5])) == d[2:5]  # the oldest were cut off
    assert new_decisions(first, first) == []
    assert Counter(x.kind for x in new_decisions(None, with_status(base, decisions=d))) == {"start": 1, "restart": 4}
