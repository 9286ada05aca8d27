"""A broker outage must not cordon the fleet: the real broker stopped and started again under a running stack.

One ``myolo-coordinator run`` process and three simulated agents (``myolo-agent run``), every one a real
process. Kafka is stopped for longer than ``lost_after_s`` and one agent is killed with SIGKILL meanwhile.
While Kafka is away the coordinator holds Lost verdicts (it hears nobody, which says nothing about the nodes);
when Kafka is back, the two live agents' spooled samples arrive and show they never stopped, and the killed
node is still found Lost and cordoned. No live node is ever cordoned.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path

from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.cordons.records import STATE_NODES, CordonRecord
from myolo.coordinator.core.coordinator import state_codec
from myolo.coordinator.localstack.identity import agent_public_keys
from tests.integration.coordinator.conftest import read_topic, wait_until
from tests.support.coordinator.identity import enroll_over_api
from tests.support.coordinator.procs import Procs, start_coordinator, status

LOST_AFTER_S = 4.0


def nodes_of(st: dict | None) -> dict[str, dict]:
    return {n["node_id"]: n for n in (st or {}).get("nodes", [])}


async def test_a_broker_outage_cordons_no_live_node(kafka, settings, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    names = [f"out-{tag}-{i}" for i in (1, 2, 3)]
    live, victim = names[:2], names[2]
    procs = Procs(tmp_path)
    try:
        fleet = f"[fleet]\nlost_after_s = {LOST_AFTER_S}\n"
        status_file = start_coordinator(procs, tmp_path, kafka.bootstrap, 'auth = "none"', fleet, name="out")
        for name in names:
            procs.start_agent(name, name, kafka.bootstrap, tmp_path / name)

        def all_ready() -> bool:
            st = status(status_file)
            seen = nodes_of(st)
            return bool(st and st["is_leader"]) and all(seen.get(n, {}).get("liveness") == "Ready" for n in names)

        await wait_until(all_ready, 90, "a leading coordinator that hears the three agents")
        # the agents' keys, enrolled as an admin does: their signed faults and acks are taken from then on
        await enroll_over_api([status(status_file)["api_url"]], agent_public_keys({n: tmp_path / n for n in names}))

        await asyncio.to_thread(kafka.stop)
        procs.signal(victim, signal.SIGKILL)  # a node that really dies during the outage

        def outage_longer_than_lost_after() -> bool:
            st = status(status_file)
            age = ((st or {}).get("ingest") or {}).get("answer_age_s")
            return age is not None and age > LOST_AFTER_S + 2

        await wait_until(outage_longer_than_lost_after, 60, "the coordinator not hearing Kafka for > lost_after_s")
        during = status(status_file)
        assert during["liveness_hold"] and "Kafka" in during["liveness_hold"]
        assert all(nodes_of(during)[n]["liveness"] != "Lost" for n in names), nodes_of(during)
        kafka.start()  # from the main thread: the broker is tied to the thread that forks it

        def settled() -> bool:
            seen = nodes_of(status(status_file))
            dead = seen.get(victim, {})
            return all(seen.get(n, {}).get("liveness") == "Ready" for n in live) and bool(
                dead.get("liveness") == "Lost" and (dead.get("cordon") or {}).get("cordoned")
            )

        await wait_until(settled, 120, "the live nodes Ready again and the killed one Lost and cordoned")
        stats = status(status_file)["stats"]  # what the agents signed, spooled through the outage included, verified
        assert stats["node_keys_enrolled"] == 3 and stats["node_events_refused"] == 0, stats
    finally:
        procs.stop_all()
    codec = state_codec(COMPONENTS)
    records = [(k, codec.decode(v, h)) for k, v, h in await read_topic(settings, STATE_NODES) if v is not None]
    cordons = {n: [r for k, r in records if k == n and isinstance(r, CordonRecord) and r.cordoned] for n in names}
    assert cordons[live[0]] == cordons[live[1]] == [], "a live node was cordoned: " + procs.tail("coordinator")
    assert [r.by for r in cordons[victim]] == ["auto:lost"]
