"""Bad input from outside while the coordinator runs: kcat (librdkafka, not our client) writes malformed and
impossible records into the samples and faults topics. Each is dead-lettered with the field and reason (a
fault of a node that is not enrolled among them), or, when it is well-formed and signed but cannot be true
(more memory used than exists, a GPU that is not there), flagged on the fleet view with the reason and not
applied. Valid samples after them are applied, a signed FAIL fault after them still cordons, and no part of
the coordinator stops."""

from __future__ import annotations

import uuid

from myolo.agent.fleetsim.simulator import FleetSimulator
from myolo.common.clock import SimClock
from myolo.events.deadletter import dead_letter_info
from myolo.events.examples import node_sample
from myolo.events.payloads import NodeFault
from myolo.events.topics import DEAD_LETTER, NODE_FAULTS, NODE_SAMPLES
from tests.integration.coordinator.conftest import fleet, read_topic
from tests.support.coordinator.identity import enroll, signed_structured
from tests.support.helpers import DROP, kcat, structured, wait_until


def fault(node: str, **kw) -> NodeFault:
    return NodeFault(node_id=node, kind="xid", health="fail", xid=79, reasons=["xid 79 (fallen off the bus)"], **kw)


async def test_kcat_bad_records_are_dead_lettered_or_flagged_and_the_coordinator_goes_on(
    kafka, settings, make_config, services
) -> None:
    tag = uuid.uuid4().hex[:6]
    clock = SimClock()  # no liveness changes unless this test moves time: only input decides what happens
    svc = await services.start(make_config(f"bad-{tag}"), clock)
    await wait_until(lambda: svc.is_leader, 30, "leadership")
    await wait_until(svc.ingest.ready.is_set, 30, "ingest assignment")

    sim = FleetSimulator(settings, 3, 2, clock=clock, node_prefix=f"kc-{tag}-", run_id=tag)
    await sim.start()
    try:
        await enroll(svc, sim.public_keys())  # the simulated nodes sign their faults, as agents do
        node, other = sim.node_ids[0], sim.node_ids[1]
        while not all(fleet(svc).node(n) for n in sim.node_ids):  # the coordinator reads from "latest": until it sees
            await sim.send_round()
            await sim.sink.flush()
            await wait_until(lambda: True)
        seq_before = fleet(svc).node(node).last_seq
        gpus_before = fleet(svc).node(node).gpus

        bad = node_sample(node, gpus=2)
        dead = {  # key -> (topic, value, headers, field, reason)
            "not-json": (NODE_SAMPLES, b"this is not json {", None, "value", "not valid JSON"),
            "unknown-type": (
                NODE_SAMPLES,
                structured(bad, type="com.example.unknown.v1"),
                None,
                "type",
                "unknown event type",
            ),
            "missing-field": (
                NODE_SAMPLES,
                structured(bad, data__node_id=DROP),
                None,
                "data.node_id",
                "missing required field",
            ),
            "util-140": (
                NODE_SAMPLES,
                structured(bad, data__gpus__1__util_gpu=140.0),
                None,
                "data.gpus[1].util_gpu",
                "<= 100",
            ),
            "negative-memory": (
                NODE_SAMPLES,
                structured(bad, data__gpus__0__mem_used_bytes=-1),
                None,
                "data.gpus[0].mem_used_bytes",
                ">= 0",
            ),
            "fault-on-samples-topic": (NODE_SAMPLES, structured(fault(node)), None, "type", "does not belong on topic"),
            "binary-bad-payload": (
                NODE_SAMPLES,
                b'{"node_id": 5}',
                {
                    "ce_specversion": "1.0",
                    "ce_id": f"{tag}-bin",
                    "ce_source": "ext/kcat",
                    "ce_type": "ai.myolo.node.sample.v1",
                    "content-type": "application/json",
                },
                "data.node_id",
                "Expected `str`",
            ),
            "fault-not-json": (NODE_FAULTS, b"\x00\x01 binary garbage", None, "value", "not valid JSON"),
            "fault-bad-health": (
                NODE_FAULTS,
                structured(fault(node), data__health="dead"),
                None,
                "data.health",
                "Invalid enum value 'dead'",
            ),
            "not-enrolled": (
                NODE_FAULTS,
                structured(fault(f"ghost-{tag}")),
                None,
                "data.node_id",
                f"node 'ghost-{tag}' is not enrolled",
            ),
        }
        other_key = sim.node_keys[other]
        # well-formed (and signed), yet not true: (topic, Kafka key, value, what the reason names); a signed
        # record keeps the key it was signed with, its node's id
        flagged = {
            "no-such-gpu": (
                NODE_FAULTS,
                other,
                signed_structured(fault(other, gpu_index=7), other_key),
                "gpu_index: GPU 7 does not exist",
            ),
            "used-over-total": (
                NODE_SAMPLES,
                f"{tag}-used-over-total",
                structured(bad, data__gpus__0__mem_used_bytes=200 << 30, data__gpus__0__mem_total_bytes=141 << 30),
                "mem_used_bytes",
            ),
        }
        dl0, rej0 = svc.ingest.stats.dead_lettered, fleet(svc).view.rejected_total
        for key, (topic, value, headers, *_) in dead.items():
            kcat(kafka.bootstrap, topic, f"{tag}-{key}", value, headers)
        for topic, key, value, _ in flagged.values():
            kcat(kafka.bootstrap, topic, key, value)
        await wait_until(lambda: svc.ingest.stats.dead_lettered >= dl0 + len(dead), 60, "dead letters")
        await wait_until(lambda: fleet(svc).view.rejected_total >= rej0 + len(flagged), 60, "flags")

        # valid samples after the bad ones are applied; a FAIL fault still cordons: nothing stopped
        await sim.send_round()
        await sim.sink.flush()
        await wait_until(lambda: fleet(svc).node(node).last_seq > seq_before, 60, "the samples after the bad ones")
        kcat(kafka.bootstrap, NODE_SAMPLES, f"kcat-{tag}", structured(node_sample(f"kcat-{tag}", gpus=2)))
        await wait_until(lambda: fleet(svc).node(f"kcat-{tag}") is not None, 60, "a valid kcat sample")
        kcat(kafka.bootstrap, NODE_FAULTS, other, signed_structured(fault(other, gpu_index=1), other_key))
        await wait_until(lambda: fleet(svc).node(other).cordoned, 60, "a cordon after the bad input")
        assert svc.ended_tasks() == [], "every coordinator component is still running"
    finally:
        await sim.stop()

    # flagged, with the reason, and not applied
    reasons = [r.reason for r in fleet(svc).view.rejections]
    for key, (*_, why) in flagged.items():
        assert any(why in r for r in reasons), (key, reasons)
    assert fleet(svc).node(f"ghost-{tag}") is None, "a fault of a node nobody enrolled does not invent the node"
    assert any("mem_used_bytes" in f for f in fleet(svc).node(node).flags)
    assert fleet(svc).node(node).gpus[0].mem_used_bytes != 200 << 30 and fleet(svc).node(node).gpus is not gpus_before
    assert fleet(svc).node(node).health == "ok" and not fleet(svc).node(node).cordoned, "garbage cordons nothing"
    assert fleet(svc).node(other).cordon.reason.startswith("FAIL xid 79 on GPU 1"), fleet(svc).node(other).cordon.reason
    assert fleet(svc).node(f"kcat-{tag}").gpus[0].util_gpu == 87.5

    # dead-lettered: the original bytes kept, with the field and the reason, by this coordinator's group
    letters = {}
    for key, value, headers in await read_topic(settings, DEAD_LETTER):
        info = dead_letter_info(headers)
        if key and key.startswith(f"{tag}-") and info.get("group") == svc.ingest.group_id:
            letters[key.removeprefix(f"{tag}-")] = (value, info)
    assert set(letters) == set(dead), sorted(letters)
    for key, (topic, value, _, field, reason) in dead.items():
        original, info = letters[key]
        assert original == value, f"{key}: original bytes kept"
        assert info["field"] == field, (key, info)
        assert reason in info["reason"], (key, info["reason"])
        assert info["topic"] == topic
