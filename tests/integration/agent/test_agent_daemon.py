"""`myolo-agent run` as a real process against the real broker: samples, sd_notify, healthz, fault injection
over the control socket, SIGTERM flush, and a broker outage with nothing lost and memory flat."""

from __future__ import annotations

import asyncio
import signal

import pytest

from myolo.agent.spool import Spool
from myolo.events.payloads import NodeFault, NodeSample
from myolo.events.topics import NODE_FAULTS, NODE_SAMPLES
from tests.support.agent.agent_proc import AgentProc, read_topic
from tests.support.helpers import wait_until

pytestmark = pytest.mark.kafka
MiB = 1 << 20


@pytest.fixture
async def agent_proc(kafka, settings):
    agents: list[AgentProc] = []

    async def make(**kw) -> AgentProc:
        a = AgentProc(kafka.bootstrap, **kw)
        agents.append(a)
        await a.start()
        return a

    yield make
    for a in agents:
        await a.cleanup()


def unique_in_order(events) -> list:
    """Partition order with resends (at-least-once) folded: the first copy of each event id."""
    seen, out = set(), []
    for e in events:
        if e.id not in seen:
            seen.add(e.id)
            out.append(e.data)
    return out


async def test_publishes_notifies_serves_health_injects_and_flushes_on_sigterm(settings, agent_proc):
    agent = await agent_proc()
    await wait_until(lambda: "READY" in agent.kinds(), timeout=60, what=f"READY=1\n{agent.log_text()}")
    await wait_until(lambda: agent.kinds().count("WATCHDOG") >= 2, timeout=30, what="WATCHDOG=1 pings")

    code, body = await asyncio.to_thread(agent.health, "GET")
    assert code == 200 and body["status"] == "ok", body
    assert set(body["checks"]) == {"nvml", "kafka", "spool", "gpus"}
    code, body = await asyncio.to_thread(agent.health, "POST")
    assert code == 200 and body["status"] == "ok", body

    out = await asyncio.to_thread(agent.cli, "inject", "--gpu", "1", "--xid", "79")
    assert out.returncode == 0 and "XID 79" in out.stdout, out.stderr

    async def xid_faults() -> list[NodeFault]:
        return [e.data for e in await read_topic(settings, NODE_FAULTS, agent.node_id) if e.data.kind == "xid"]

    faults: list[NodeFault] = []

    async def poll_faults() -> None:
        nonlocal faults
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while not faults and loop.time() < deadline:
            faults = await xid_faults()

    await poll_faults()
    assert [(f.xid, f.gpu_index, f.health, f.simulated) for f in faults] == [(79, 1, "fail", True)]
    await wait_until(lambda: agent.health("GET")[1]["status"] == "fail", timeout=30, what="healthz fail")
    assert agent.health("GET")[0] == 503

    bad = await asyncio.to_thread(agent.cli, "inject", "--gpu", "7", "--xid", "79")
    assert bad.returncode == 1 and "--gpu 7" in bad.stderr

    agent.signal(signal.SIGTERM)
    assert await asyncio.to_thread(agent.proc.wait, 30) == 0, agent.log_text()
    # the last datagram is already queued on the socket: wait for the reader to take it
    await wait_until(lambda: agent.kinds()[-1:] == ["STOPPING"], timeout=30, what="STOPPING=1, the last")
    samples = unique_in_order(await read_topic(settings, NODE_SAMPLES, agent.node_id))
    assert all(isinstance(s, NodeSample) and s.backend == "sim" for s in samples)
    seqs = [s.seq for s in samples]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) >= 8
    # the flush emptied the spool: every sample taken is in Kafka
    spool = Spool(agent.spool_dir, max_bytes=64 * MiB, segment_bytes=MiB, fsync="never")
    assert spool.pending == 0
    assert spool.stats().last_seq >= len(seqs)


async def test_broker_outage_spools_then_drains_in_order_with_flat_memory(kafka, settings, agent_proc):
    agent = await agent_proc(interval_s=0.1)
    await wait_until(lambda: "READY" in agent.kinds(), timeout=60, what=f"READY=1\n{agent.log_text()}")
    await wait_until(
        lambda: agent.health("GET")[1]["checks"]["spool"]["data"]["pending"] == 0, timeout=30, what="idle spool"
    )

    await asyncio.to_thread(kafka.stop)
    try:
        await wait_until(
            lambda: agent.health("GET")[1]["checks"]["kafka"]["status"] == "warn", timeout=60, what="kafka away"
        )
        await wait_until(
            lambda: agent.health("GET")[1]["checks"]["spool"]["data"]["pending"] >= 50, timeout=60, what="spooling"
        )
        rss_early = agent.rss()
        await wait_until(
            lambda: agent.health("GET")[1]["checks"]["spool"]["data"]["pending"] >= 250, timeout=120, what="long outage"
        )
        rss_late = agent.rss()
        status = agent.health("GET")[1]
        assert status["status"] == "warn"  # Kafka away is warn, not fail: the spool holds everything
        assert status["checks"]["spool"]["data"]["dropped"] == 0
    finally:
        kafka.start()  # from the main thread: the broker is tied to the thread that forks it
    # 200 more samples spooled (~1 MB of events on disk) must not show in memory
    assert rss_late - rss_early < 4 * MiB, (rss_early, rss_late)
    await wait_until(
        lambda: agent.health("GET")[1]["checks"]["spool"]["data"]["pending"] <= 2, timeout=120, what="spool drained"
    )
    await wait_until(lambda: agent.health("GET")[1]["status"] == "ok", timeout=60, what="healthy again")
    agent.signal(signal.SIGTERM)
    assert await asyncio.to_thread(agent.proc.wait, 30) == 0, agent.log_text()
    samples = unique_in_order(await read_topic(settings, NODE_SAMPLES, agent.node_id))
    seqs = [s.seq for s in samples]
    assert seqs == list(range(1, len(seqs) + 1)), "a sample was lost or reordered across the outage"
    assert len(seqs) >= 250  # at least everything that sat in the spool during the outage
