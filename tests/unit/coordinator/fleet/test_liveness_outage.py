"""A broker outage must not cordon the fleet (simulated time, the real components, Kafka's writes recorded).

"This node is silent" and "I hear nobody" look alike; the fleet holds Lost verdicts while Kafka does not answer
the coordinator's own consumer, while ingest lags, or while every live node fell silent at once, and judges
delayed samples by their own time. A node that really died is still found Lost, and an automatic Lost cordon
lifts itself when delayed samples show the node never stopped. The same with a real broker and real processes:
tests/integration/coordinator/test_broker_outage.py."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from myolo.common.clock import SimClock
from myolo.coordinator.cordons.component import Cordons
from myolo.coordinator.cordons.policy import AUTO_ALIVE, AUTO_LOST, never_stopped
from myolo.coordinator.cordons.records import STATE_NODES, CordonRecord
from myolo.coordinator.core.coordinator import Coordinator
from myolo.coordinator.core.ingest import IngestState
from myolo.coordinator.core.leadership import LeaderTerm
from myolo.coordinator.fleet import liveness
from myolo.coordinator.fleet.component import Fleet
from myolo.coordinator.fleet.liveness import LivenessPolicy
from myolo.coordinator.fleet.model import NodeState
from myolo.coordinator.fleet.view import FleetView
from myolo.events.bus import RecordInfo
from myolo.events.envelope import new_event
from myolo.events.payloads import Command, GpuReading, NodeSample
from tests.support.coordinator.offline import offline_coordinator
from tests.support.coordinator.recorder import recording_producers

INFO = RecordInfo("t", 0, 0)
NODES = ("n1", "n2", "n3")


class Hearing:
    """The coordinator's ingest health, set by the test."""

    def __init__(self) -> None:
        self.answering = True

    def state(self) -> IngestState:
        return IngestState(assigned=True, answer_age_s=0.1 if self.answering else 60.0, lag_s=0.0)


class Stack:
    def __init__(self, tmp_path) -> None:
        self.clock = SimClock()
        self.writes, producers = recording_producers()
        self.coord: Coordinator = offline_coordinator(
            tmp_path,
            self.clock,
            producers,
            MYOLO_FLEET_LOST_AFTER_S="10",
            MYOLO_FLEET_REQUEST_SAMPLE_ON_SUSPECT="false",
        )
        self.fleet, self.cordons = self.coord.get(Fleet), self.coord.get(Cordons)
        self.hearing = Hearing()
        self.fleet.ctx.ingest = self.hearing
        self.seq = dict.fromkeys(NODES, 0)

    async def start(self) -> None:
        await self.coord.assume_term(LeaderTerm(epoch=3, instance_id="me", started=self.clock.now()))
        self.writer = asyncio.create_task(self.cordons.writer.run())

    async def sample(self, node: str, taken: float | None = None) -> None:
        """One sample of ``node`` taken at ``taken`` (its clock; default now), delivered now."""
        self.seq[node] += 1
        s = NodeSample(
            node_id=node, backend="sim", gpus=[GpuReading(index=0, uuid="G", name="sim")], seq=self.seq[node]
        )
        clock = SimClock(start=taken) if taken is not None else self.clock
        await self.coord.router(new_event(s, f"/myolo/agent/{node}", clock=clock), INFO)

    async def second(self, alive: tuple[str, ...] = NODES, delivered: bool = True) -> None:
        """One second of fleet life: the alive nodes sample (delivered now, or spooled for later), then ticks."""
        for node in alive:
            if delivered:
                await self.sample(node)
        for _ in range(2):
            await self.clock.advance(0.5)
            await self.coord.tick()
        for _ in range(5):
            await asyncio.sleep(0)  # let the cordon writer run

    def cordons_of(self, node: str) -> list[CordonRecord]:
        return [r for topic, r in self.writes if topic == STATE_NODES and r is not None and r.node_id == node]

    def drains(self, node: str) -> list[dict]:
        return [c.args for kind, c in self.writes if kind == "send" and isinstance(c, Command) and c.node_id == node]

    async def close(self) -> None:
        self.writer.cancel()


@pytest.fixture
async def stack(tmp_path):
    s = Stack(tmp_path)
    await s.start()
    yield s
    await s.close()


async def test_an_outage_cordons_nobody_and_a_node_killed_during_it_is_found_lost(stack: Stack) -> None:
    for _ in range(5):
        await stack.second()
    outage_start = stack.clock.now()
    stack.hearing.answering = False  # Kafka stops; the agents spool; n3 dies during the outage
    for _ in range(49):
        await stack.second(delivered=False)
    assert all(stack.fleet.node(n).liveness == "Suspect" for n in NODES) and stack.fleet.hold is not None
    assert [stack.cordons_of(n) for n in NODES] == [[], [], []]
    stack.hearing.answering = True  # Kafka is back; the agents reconnect with back-off, 8 s later
    for _ in range(8):
        await stack.second(alive=())
    assert stack.fleet.hold is not None and "reconnect" in stack.fleet.hold  # the resume grace holds
    assert [stack.cordons_of(n) for n in NODES] == [[], [], []]
    for t in range(57):  # n1 and n2's spooled samples arrive with their own times
        for node in ("n1", "n2"):
            await stack.sample(node, taken=outage_start + t)
    await stack.second(alive=("n1", "n2"))
    assert [stack.fleet.node(n).liveness for n in NODES] == ["Ready", "Ready", "Suspect"]
    for _ in range(8):  # the grace (15 s) ends: the node that really died is Lost
        await stack.second(alive=("n1", "n2"))
    assert stack.fleet.hold is None
    assert [stack.fleet.node(n).liveness for n in NODES] == ["Ready", "Ready", "Lost"]
    assert stack.cordons_of("n1") == stack.cordons_of("n2") == []
    (lost,) = stack.cordons_of("n3")
    assert lost.cordoned and lost.by == AUTO_LOST and lost.silent_since is not None


async def test_every_node_silent_at_once_holds_lost_verdicts_for_a_while(stack: Stack) -> None:
    for _ in range(3):
        await stack.second()
    for _ in range(60):  # Kafka answers the coordinator, but no agent gets through (their network is down)
        await stack.second(alive=())
    assert stack.fleet.hold is not None and "every live node" in stack.fleet.hold
    assert all(stack.fleet.node(n).liveness == "Suspect" for n in NODES)
    assert [stack.cordons_of(n) for n in NODES] == [[], [], []]


async def test_a_node_killed_while_the_others_sample_is_lost_at_the_usual_time(stack: Stack) -> None:
    for _ in range(3):
        await stack.second()
    for second in range(1, 12):
        await stack.second(alive=("n1", "n2"))
        if second == 8:  # its last sample was 9 s ago: not yet Lost
            assert stack.fleet.node("n3").liveness == "Suspect"
    assert stack.fleet.node("n3").liveness == "Lost" and stack.fleet.hold is None
    assert stack.cordons_of("n3")[0].by == AUTO_LOST and stack.drains("n3") == [
        {"draining": True, "reason": stack.cordons_of("n3")[0].reason}
    ]


async def test_a_lost_cordon_lifts_itself_when_delayed_samples_show_the_node_never_stopped(stack: Stack) -> None:
    for _ in range(3):
        await stack.second()
    cut = stack.clock.now()
    for _ in range(15):  # only n1's link to Kafka is cut: it spools; the coordinator hears the others
        await stack.second(alive=("n2", "n3"))
    (cordon,) = stack.cordons_of("n1")
    assert cordon.cordoned and cordon.by == AUTO_LOST
    for t in range(16):  # the link is back: n1's spooled samples, one a second, arrive late
        await stack.sample("n1", taken=cut + t)
    await stack.second()
    records = stack.cordons_of("n1")
    assert [r.cordoned for r in records] == [True, False] and records[-1].by == AUTO_ALIVE
    assert "never stopped" in records[-1].reason and not stack.fleet.node("n1").cordoned
    assert stack.drains("n1")[-1]["draining"] is False  # the drain is lifted too


async def test_an_operator_cordon_and_a_real_gap_never_clear_by_themselves(stack: Stack) -> None:
    for _ in range(3):
        await stack.second()
    await stack.cordons.cordon("n2", "bad fan", "alice")
    cut = stack.clock.now()
    for _ in range(15):
        await stack.second(alive=("n3",))
    for t in (0, 1, 2, 14, 15):  # n1 really stopped for 12 s: a gap longer than lost_after_s
        await stack.sample("n1", taken=cut + t)
    await stack.second()
    assert stack.fleet.node("n1").cordoned and stack.fleet.node("n2").cordoned
    assert stack.fleet.node("n2").cordon.by == "operator:alice"


def test_never_stopped_needs_the_samples_to_cover_the_cordon() -> None:
    cordon = CordonRecord(node_id="n", cordoned=True, reason="Lost", by=AUTO_LOST, time=120.0, silent_since=100.0)
    node = NodeState(node_id="n", cordon=cordon, continuous_since=50.0, last_event_time=119.0)
    assert never_stopped(node) is None  # not yet past the cordon
    node = msgspec.structs.replace(node, last_event_time=121.0)
    assert never_stopped(node) is not None
    # the run began after the silence began: it did stop
    assert never_stopped(msgspec.structs.replace(node, continuous_since=101.0)) is None
    not_lost = CordonRecord(node_id="n", cordoned=True, reason="x", by="auto:fault", time=1.0)
    assert never_stopped(msgspec.structs.replace(node, cordon=not_lost)) is None


def test_hold_keeps_lost_nodes_lost_and_others_suspect() -> None:
    view, policy = FleetView(), LivenessPolicy(lost_after_s=10.0)
    for name, last in (("old", 0.0), ("new", 95.0)):
        view.nodes_by_id[name] = NodeState(node_id=name, last_seen=last, liveness="Lost" if name == "old" else "Ready")
    changes = liveness.tick(view, policy, 110.0, hold_lost=True)
    assert [(t.node.node_id, t.after) for t in changes] == [("new", "Suspect")]
    assert view.node("old").liveness == "Lost"
    assert liveness.all_silent(view, policy, 110.0, min_nodes=2) is False  # one live node is not "every node"
    view.nodes_by_id["other"] = NodeState(node_id="other", last_seen=96.0)
    assert liveness.all_silent(view, policy, 110.0, min_nodes=2) is True
    assert liveness.all_silent(view, policy, 97.0, min_nodes=2) is False


def test_ingest_trouble_names_the_reason() -> None:
    assert IngestState(assigned=True, answer_age_s=0.2, lag_s=0.0).trouble(3.0, 3.0) is None
    assert "no answer from Kafka for 7.0 s" in IngestState(assigned=True, answer_age_s=7.0, lag_s=0).trouble(3.0, 3.0)
    assert "12.0 s behind" in IngestState(assigned=True, answer_age_s=0.1, lag_s=12.0).trouble(3.0, 3.0)
    assert "no partitions" in IngestState(assigned=False, answer_age_s=None, lag_s=0.0).trouble(3.0, 3.0)
