"""`myolo-agent run` as a real process against the real broker, starting on a spool with one damaged frame:
the other records are all sent, and the loss shows in /healthz, in `myolo-agent status` and as a fault event."""

from __future__ import annotations

import asyncio
import signal

import pytest

from myolo.agent.publish import Publisher
from myolo.agent.spool import Spool
from myolo.agent.spool.segment import Frame, SegmentFile
from myolo.common.clock import SystemClock
from myolo.events.payloads import NodeFault, NodeSample
from myolo.events.topics import NODE_FAULTS, NODE_SAMPLES
from tests.support.agent.agent_proc import AgentProc, read_topic
from tests.support.helpers import wait_until

pytestmark = pytest.mark.kafka
MiB = 1 << 20
SPOOLED = range(100_000, 100_050)  # seqs of the samples an earlier run left in the spool (far above ours)
DAMAGED = 20  # the frame whose body gets one flipped bit


def leave_in_spool(agent: AgentProc) -> None:
    """What an agent that stopped while Kafka was away leaves behind, with one frame damaged on disk since."""
    spool = Spool(agent.spool_dir, max_bytes=64 * MiB, segment_bytes=MiB, fsync="never")
    earlier = Publisher(
        spool, lambda: None, source=f"/myolo/agent/{agent.node_id}", node_id=agent.node_id, clock=SystemClock()
    )
    for seq in SPOOLED:
        earlier.publish(NodeSample(node_id=agent.node_id, backend="sim", gpus=[], seq=seq))
    spool.close()
    [segment] = sorted(agent.spool_dir.glob("seg-*.spool"))
    with SegmentFile(segment, segment.stat().st_size) as fh:
        frame = [f for f in fh.frames(0) if isinstance(f, Frame)][DAMAGED]
    data = bytearray(segment.read_bytes())
    data[frame.end - 5] ^= 1
    segment.write_bytes(bytes(data))


async def test_a_damaged_frame_costs_one_event_and_shows_in_health_status_and_a_fault(kafka, settings):
    agent = AgentProc(kafka.bootstrap)
    try:
        leave_in_spool(agent)
        await agent.start()
        await wait_until(lambda: "READY" in agent.kinds(), timeout=60, what=f"READY=1\n{agent.log_text()}")

        def spool_check() -> dict:
            return agent.health("GET")[1]["checks"]["spool"]

        await wait_until(lambda: spool_check()["data"]["pending"] <= 2, timeout=60, what="spool drained")
        check = spool_check()
        assert check["status"] == "warn" and check["data"]["corrupt_frames"] == 1, check
        assert check["detail"] == "1 events lost since start (1 corrupt)"
        assert agent.health("POST")[1]["checks"]["spool"]["data"]["dropped"] == 1

        out = await asyncio.to_thread(agent.cli, "status")
        assert out.returncode == 0 and out.stdout.startswith("warn:"), out
        assert "1 dropped (1 corrupt)" in out.stdout

        async def spool_faults() -> list[NodeFault]:
            return [e.data for e in await read_topic(settings, NODE_FAULTS, agent.node_id) if e.data.kind == "spool"]

        faults: list[NodeFault] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while not faults and loop.time() < deadline:
            faults = await spool_faults()
        assert [(f.health, f.reasons) for f in faults] == [
            ("warn", ["1 record lost to damaged spool frames (disk corruption or a lost file)"])
        ]

        seen: set[str] = set()
        earlier = []
        for e in await read_topic(settings, NODE_SAMPLES, agent.node_id):  # at least once: skip resent copies
            if e.id not in seen and isinstance(e.data, NodeSample) and e.data.seq >= SPOOLED[0]:
                earlier.append(e.data.seq)
            seen.add(e.id)
        assert earlier == [s for i, s in enumerate(SPOOLED) if i != DAMAGED]

        agent.signal(signal.SIGTERM)
        assert await asyncio.to_thread(agent.proc.wait, 30) == 0, agent.log_text()
    finally:
        await agent.cleanup()
