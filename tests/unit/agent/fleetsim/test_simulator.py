"""The fleet simulator without a broker: records land in a MemorySink, time is a SimClock."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict

import numpy as np
import pytest

from myolo.agent.fleetsim.simulator import FleetSimulator
from myolo.agent.fleetsim.sink import MemorySink, partition_of
from myolo.agent.health.xid import FAIL_XIDS, WARN_XIDS
from myolo.common.clock import SimClock
from myolo.common.keys import Ed25519Signer
from myolo.events.codec import decode
from myolo.events.errors import SignatureError
from myolo.events.payloads import NodeFault, NodeSample
from myolo.events.signing import SIG, verify_with
from myolo.events.topics import NODE_FAULTS, NODE_SAMPLES


def make(nodes: int = 200, gpus: int = 8, fault_rate: float = 0.0, **kw) -> tuple[FleetSimulator, SimClock, MemorySink]:
    clock = SimClock()
    sink = MemorySink(clock_now=clock.monotonic)
    sim = FleetSimulator(None, nodes, gpus, 1.0, fault_rate, clock, sink=sink, **kw)
    return sim, clock, sink


async def play(sim: FleetSimulator, clock: SimClock, seconds: float) -> None:
    await sim.start()
    task = asyncio.create_task(sim.run(seconds))
    await asyncio.sleep(0)
    await clock.advance(seconds + 0.5)
    await asyncio.wait_for(task, 5)


def samples(sink: MemorySink) -> list:
    return [(r, decode(r.value, r.headers, r.key)) for r in sink.records if r.topic == NODE_SAMPLES]


async def test_every_record_is_a_valid_labelled_sample_with_unique_ids() -> None:
    sim, clock, sink = make(nodes=50, gpus=8)
    await play(sim, clock, 3.0)
    got = samples(sink)
    assert len(got) == 150 == sim.stats.samples_sent
    ids = {ev.id for _, ev in got}
    assert len(ids) == 150, "event ids are unique (the coordinator deduplicates by id)"
    seqs = defaultdict(list)
    for rec, ev in got:
        s = ev.data
        assert isinstance(s, NodeSample) and s.backend == "sim" and len(s.gpus) == 8
        assert ev.type == "ai.myolo.node.sample.v1" and ev.source == f"/myolo/agent/{s.node_id}"
        assert rec.key == s.node_id.encode() and rec.partition == partition_of(rec.key, sink.n_partitions)
        assert [g.index for g in s.gpus] == list(range(8))
        assert len({g.uuid for g in s.gpus}) == 8
        seqs[s.node_id].append(s.seq)
    assert len(seqs) == 50 and all(v == [1, 2, 3] for v in seqs.values())


async def test_samples_are_spread_over_the_second_not_bursts() -> None:
    sim, clock, sink = make(nodes=200, gpus=1)
    await play(sim, clock, 3.0)
    per_node = defaultdict(list)
    for rec, ev in samples(sink):
        per_node[ev.data.node_id].append(rec.at)
    # each node once a second, exactly a period apart
    assert all(np.allclose(np.diff(t), 1.0) for t in per_node.values())
    # the fleet is spread evenly: every 10 ms slot carries 2 of the 200 nodes, no 100 ms window more than 10%
    per_slot = Counter(round(rec.at, 3) for rec in sink.records)
    assert len(per_slot) == 300 and set(per_slot.values()) == {2}
    per_100ms = Counter(int(rec.at * 10) for rec in sink.records)
    assert max(per_100ms.values()) <= 20
    assert sim.stats.late_slots == 0


async def test_gpu_readings_are_plausible_and_move_together() -> None:
    sim, clock, sink = make(nodes=300, gpus=8)
    await play(sim, clock, 2.0)
    util, power, temp = [], [], []
    for _, ev in samples(sink):
        for g in ev.data.gpus:
            assert 0.0 <= g.util_gpu <= 100.0 and 0.0 <= g.util_mem <= 100.0
            assert g.mem_used_bytes + g.mem_free_bytes + g.mem_reserved_bytes == g.mem_total_bytes
            assert 0 < g.power_w <= 1.2 * g.power_limit_w
            assert 20.0 < g.temp_gpu_c < 95.0 and g.temp_mem_c > g.temp_gpu_c
            util.append(g.util_gpu)
            power.append(g.power_w)
            temp.append(g.temp_gpu_c)
    assert np.corrcoef(util, power)[0, 1] > 0.9, "power follows utilisation"
    assert np.corrcoef(power, temp)[0, 1] > 0.5, "temperature follows power"
    assert np.std(util) > 10, "not every GPU is doing the same thing"


async def test_random_faults_arrive_at_the_chosen_rate_with_the_agents_xid_classes() -> None:
    sim, clock, sink = make(nodes=100, gpus=8, fault_rate=5.0)
    await play(sim, clock, 20.0)
    faults = [decode(r.value, r.headers, r.key).data for r in sink.records if r.topic == NODE_FAULTS]
    assert 60 <= len(faults) <= 140, f"5/s for 20 s is ~100 faults, got {len(faults)}"
    assert len(faults) == sim.stats.faults_sent
    for f in faults:
        assert isinstance(f, NodeFault) and f.kind == "xid" and f.simulated
        assert f.health == ("fail" if f.xid in FAIL_XIDS else "warn" if f.xid in WARN_XIDS else "ok")
        assert f.xid is not None and str(f.xid) in f.reasons[0]
    kinds = Counter(f.health for f in faults)
    assert kinds["warn"] > kinds["fail"] > 0


async def test_injected_fault_is_recorded_and_later_samples_show_the_failure() -> None:
    sim, clock, sink = make(nodes=20, gpus=4)
    await play(sim, clock, 1.0)
    node = sim.node_ids[7]
    sent = await sim.inject_fault(node, xid=79, gpu=2)
    assert sent.injected and sent.health == "fail" and sent.sent_at == clock.now() and sent.acked_perf is not None
    fault_rec = [r for r in sink.records if r.topic == NODE_FAULTS]
    assert len(fault_rec) == 1 and fault_rec[0].key == node.encode()
    ev = decode(fault_rec[0].value, fault_rec[0].headers, fault_rec[0].key)
    assert ev.id == sent.event_id and ev.data.xid == 79 and ev.data.gpu_index == 2
    sink.records.clear()
    task = asyncio.create_task(sim.run(5.0))
    await asyncio.sleep(0)
    await clock.advance(5.5)
    await task
    after = [ev.data for _, ev in samples(sink) if ev.data.node_id == node]
    assert after and all(s.health == "fail" and "xid 79" in s.health_reasons[-1] for s in after)
    assert after[-1].gpus[2].health == "fail" and after[-1].gpus[2].util_gpu < 5.0
    assert after[-1].gpus[1].health == "ok"
    sim.clear_faults(node)
    await sim.send_round()
    assert samples(sink)[-20:][7][1].data.health == "ok"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"nodes": 0}, "nodes"),
        ({"gpus": 0}, "gpus"),
        ({"rate_hz": 0.0}, "rate_hz"),
        ({"fault_rate": -1.0}, "fault_rate"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict, field: str) -> None:
    args = {"nodes": 10, "gpus": 8, "rate_hz": 1.0, "fault_rate": 0.0, **kwargs}
    with pytest.raises(ValueError, match=field):
        FleetSimulator(None, clock=SimClock(), sink=MemorySink(), **args)


async def test_inject_on_an_unknown_node_or_gpu_is_refused() -> None:
    sim, _, _ = make(nodes=5, gpus=2)
    await sim.start()
    with pytest.raises(ValueError, match="node"):
        await sim.inject_fault("no-such-node")
    with pytest.raises(ValueError, match="gpu"):
        await sim.inject_fault(0, gpu=2)


async def test_faults_are_signed_with_their_nodes_key_and_samples_are_not() -> None:
    """A simulated fault verifies against its node's public key only (what a test enrols); a healthy sample
    is unsigned telemetry, an unhealthy one is signed as an agent signs it. Given keys are used as they are; a missing one is refused."""
    given = {f"key-node-{i:05d}": Ed25519Signer.generate() for i in range(3)}
    sim, clock, sink = make(nodes=3, gpus=2, node_prefix="key-node-", node_keys=given)
    assert {n: k.key_id for n, k in sim.public_keys().items()} == {n: k.key_id for n, k in given.items()}
    await play(sim, clock, 1.0)
    await sim.inject_fault(1, xid=79)
    await sim.inject_fault(2, xid=min(WARN_XIDS))
    faults = [decode(r.value, r.headers, r.key) for r in sink.records if r.topic == NODE_FAULTS]
    publics = sim.public_keys()
    for ev in faults:
        verify_with(ev, publics[ev.data.node_id], "fault")
        with pytest.raises(SignatureError):
            verify_with(ev, publics["key-node-00000"], "fault")
    assert all(SIG not in ev.extensions for _, ev in samples(sink))  # healthy until now: telemetry
    sink.records.clear()
    await sim.send_round()  # nodes 1 and 2 now report fail and warn: their samples could cordon, so signed
    after = {ev.data.node_id: ev for _, ev in samples(sink)}
    assert {n: ev.data.health for n, ev in after.items()} == {
        "key-node-00000": "ok",
        "key-node-00001": "fail",
        "key-node-00002": "warn",
    }
    assert SIG not in after["key-node-00000"].extensions
    for node in ("key-node-00001", "key-node-00002"):
        verify_with(after[node], publics[node], "sample")
    with pytest.raises(ValueError, match="node_keys: no key for 1 node"):
        make(nodes=4, gpus=2, node_prefix="key-node-", node_keys=given)
    assert len({k.key_id for k in make(nodes=3, gpus=1)[0].public_keys().values()}) == 3  # generated, one per node
