"""One coordinator against the real broker, on simulated time: samples build the view, a FAIL fault and a
Lost node cordon automatically (recorded in the state topic first, then a drain command), a WARN does not, an operator cordons
and uncordons, implausible samples are flagged and the coordinator goes on, and a restarted coordinator
finds every decision again by reading the state topics."""

from __future__ import annotations

import uuid

from myolo.common.clock import SimClock
from myolo.coordinator.cordons.records import STATE_NODES
from myolo.coordinator.fleet.model import Cordon
from myolo.events.payloads import GpuReading, NodeFault, NodeSample
from tests.integration.coordinator.conftest import commands, cordons, fleet, state_records, wait_until
from tests.support.api_auth import VIEWER
from tests.support.coordinator.identity import PlayedNodes


def sample(node: str, seq: int, health: str = "ok", util: float = 50.0, used: int = 10) -> NodeSample:
    gpus = [
        GpuReading(index=i, uuid=f"GPU-{node}-{i}", name="sim", util_gpu=util, mem_total_bytes=100, mem_used_bytes=used)
        for i in range(2)
    ]
    return NodeSample(node_id=node, backend="sim", gpus=gpus, seq=seq, health=health)


async def test_view_reactions_and_restart(settings, make_config, services, producer, clock) -> None:
    tag = uuid.uuid4().hex[:6]
    ok, bad, quiet, warn = (f"{n}-{tag}" for n in ("ok", "bad", "quiet", "warn"))
    cfg = make_config(f"c1-{tag}")
    svc = await services.start(cfg, clock)
    await wait_until(lambda: svc.is_leader, 30, "leadership")
    await wait_until(svc.ingest.ready.is_set, 30, "ingest assignment")
    played = PlayedNodes(producer, clock)  # faults are signed by their node's enrolled key, from its agent
    await played.enroll(svc, bad, warn, f"ghost-{tag}")  # ghost: enrolled, never heard from

    seq = 0
    while not all(fleet(svc).node(n) for n in (ok, bad, quiet, warn)):  # "latest": publish until it is being read
        seq += 1
        for n in (ok, bad, quiet, warn):
            await producer.send(sample(n, seq))
        await wait_until(lambda: True)
    assert fleet(svc).node(ok).liveness == "Ready" and fleet(svc).node(ok).gpus[0].util_gpu == 50.0

    # a FAIL fault cordons, recorded in the state topic; a WARN is shown, not acted on
    await played.send(NodeFault(node_id=bad, kind="xid", health="fail", xid=79, gpu_index=1, reasons=["XID 79"]))
    await played.send(NodeFault(node_id=warn, kind="ecc", health="warn", reasons=["corrected ECC rising"]))
    await wait_until(lambda: fleet(svc).node(bad).cordoned, 30, "auto cordon")
    rec = fleet(svc).node(bad).cordon
    assert rec.by == "auto:fault" and "xid 79" in rec.reason.lower() and "GPU 1" in rec.reason
    assert rec.epoch == svc.epoch
    assert [r.node_id for r in await state_records(settings, STATE_NODES, bad)] == [bad]
    # ... and, once recorded, the node is told to drain (a signed command of this term)
    await wait_until(
        lambda: any(i.node_id == bad and i.action == "drain" for i in commands(svc).intents()), 30, "drain"
    )
    drain = next(i for i in commands(svc).intents() if i.node_id == bad and i.action == "drain")
    assert drain.epoch == svc.epoch and "79" in drain.args["reason"]
    await wait_until(lambda: any(f.kind == "ecc" for f in fleet(svc).node(warn).recent_faults), 30, "warn fault")
    assert fleet(svc).node(warn).health == "warn" and not fleet(svc).node(warn).cordoned

    # implausible input is flagged with the reason; the coordinator keeps going
    broken = sample(ok, seq + 1, used=500)
    await producer.send(broken)
    await wait_until(lambda: fleet(svc).node(ok).flags, 30, "flag")
    assert "mem_used_bytes" in fleet(svc).node(ok).flags[-1] and fleet(svc).node(ok).gpus[0].mem_used_bytes == 10
    await played.send(NodeFault(node_id=f"ghost-{tag}", kind="xid", health="fail", xid=79))
    await wait_until(lambda: any(r.node_id == f"ghost-{tag}" for r in fleet(svc).view.rejections), 30, "unknown node")
    assert fleet(svc).node(f"ghost-{tag}") is None

    # time passes: everyone but `quiet` keeps sampling; quiet goes Suspect, then Lost, and is cordoned
    for second in range(1, 12):
        seq += 1
        before = svc.ingest.stats.handled
        for n in (ok, bad, warn):
            await producer.send(sample(n, seq))
        await wait_until(lambda b=before: svc.ingest.stats.handled >= b + 3, 30, "samples handled")
        await clock.advance(1.0)
        if second == 4:
            assert fleet(svc).node(quiet).liveness == "Suspect" and fleet(svc).node(ok).liveness == "Ready"
    await wait_until(lambda: fleet(svc).node(quiet).cordoned, 30, "lost cordon")
    assert fleet(svc).node(quiet).liveness == "Lost" and fleet(svc).node(quiet).cordon.by == "auto:lost"
    assert fleet(svc).node(ok).liveness == "Ready" and not fleet(svc).node(ok).cordoned

    # the operator
    rec = await cordons(svc).cordon(ok, "bad fan", by="alice")
    assert rec.by == "operator:alice" and fleet(svc).node(ok).cordoned
    rec = await cordons(svc).uncordon(bad, "GPU replaced", by="bob")
    assert not fleet(svc).node(bad).cordoned and rec.reason == "GPU replaced"

    # a restarted coordinator reads the state to the end before it acts, and finds every decision
    await services.stop(svc)
    again = await services.start(make_config(f"c2-{tag}"), SimClock())
    found = {n: fleet(again).node(n).cordon for n in (ok, bad, quiet) if fleet(again).node(n)}
    assert isinstance(found[ok], Cordon) and found[ok].cordoned and found[ok].by == "operator:alice"
    assert not found[bad].cordoned and found[quiet].by == "auto:lost"
    await wait_until(lambda: again.is_leader, 30, "leadership of the second")
    assert again.epoch > rec.epoch


async def test_the_service_serves_its_http_api(make_config, services, api_tokens) -> None:
    """The wiring of myolo.coordinator.api into the service: an ephemeral port, advertised as the leader's URL."""
    import aiohttp

    tag = uuid.uuid4().hex[:6]
    svc = await services.start(make_config(f"api-{tag}", MYOLO_API_ENABLED="true", MYOLO_API_PORT="0"), SimClock())
    assert not svc.api_url.endswith(":0")
    await wait_until(lambda: svc.is_leader, 30, "leadership")
    bearer = {"Authorization": f"Bearer {api_tokens[1][VIEWER]}"}
    async with aiohttp.ClientSession() as http, http.get(f"{svc.api_url}/v1/leader", headers=bearer) as resp:
        body = await resp.json()
    assert resp.status == 200 and body["leader_id"] == svc.instance_id and body["api_url"] == svc.api_url
