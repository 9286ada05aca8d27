"""The core with its components, without a broker (nothing here starts a Kafka client): who may write, what
a FAIL fault or a newer term recorded by another coordinator does, how events, state, ticks, config and
routes reach components, and that one failing component stops nothing else. The same paths with the real
broker and real processes: tests/integration/coordinator/."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from myolo.common.clock import SimClock
from myolo.coordinator.api import openapi
from myolo.coordinator.api.app import create_app
from myolo.coordinator.commands.component import Commands
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.cordons.component import Cordons
from myolo.coordinator.cordons.records import STATE_NODES, CordonRecord
from myolo.coordinator.core.component import Component, RouteSet, StateTopic
from myolo.coordinator.core.coordinator import Coordinator
from myolo.coordinator.core.errors import ComponentError, NotLeader, UnknownNode
from myolo.coordinator.core.leadership import STATE_COORDINATOR, TERM_KEY, LeaderTerm
from myolo.coordinator.fleet.interface import FleetNodes
from myolo.events.bus import RecordInfo
from myolo.events.envelope import new_event
from myolo.events.payloads import GpuReading, NodeFault, NodeSample, ReleasePublished
from tests.support.api_auth import VIEWER, bearer, security
from tests.support.coordinator.offline import offline_coordinator

STATE_TOY = "myolo.state.toy"  # a topic no real component owns
INFO = RecordInfo("t", 0, 0)


@pytest.fixture
def coord(tmp_path) -> Coordinator:
    return offline_coordinator(tmp_path)


def term(epoch: int, who: str) -> LeaderTerm:
    return LeaderTerm(epoch=epoch, instance_id=who, api_url=f"http://{who}:8480", started=0.0)


async def feed(coord: Coordinator, payload) -> None:
    await coord.router(new_event(payload, "agent", clock=coord.clock), INFO)


def sample(node_id: str = "n1") -> NodeSample:
    return NodeSample(node_id=node_id, backend="sim", gpus=[GpuReading(index=0, uuid="G", name="sim")])


async def test_a_standby_redirects_writes_to_the_recorded_leader(coord) -> None:
    cordons = coord.get(Cordons)
    with pytest.raises(NotLeader) as exc:
        await cordons.cordon("n1", "x", "alice")
    assert exc.value.leader_url is None and "retry shortly" in str(exc.value)
    coord.apply_state(STATE_COORDINATOR, TERM_KEY, term(4, "other"), "term")
    with pytest.raises(NotLeader) as exc:
        await cordons.uncordon("n1", "x", "alice")
    assert exc.value.leader_url == "http://other:8480" and exc.value.leader_id == "other"
    info = coord.leader_info()
    assert (info.instance_id, info.epoch, info.is_self) == ("other", 4, False)


async def test_only_the_leader_reacts_to_a_fail_fault(coord) -> None:
    cordons, fleet = coord.get(Cordons), coord.get(FleetNodes)
    await feed(coord, sample())
    await feed(coord, NodeFault(node_id="n1", kind="xid", health="fail", xid=79))
    assert cordons.writer.queued == 0 and fleet.node("n1").health == "fail"  # shown, not acted on
    await coord.assume_term(term(5, "me"))
    assert cordons.writer.queued == 1  # the sweep at the start of the term found the failed node
    await feed(coord, NodeFault(node_id="n1", kind="xid", health="fail", xid=79))
    await feed(coord, NodeFault(node_id="n1", kind="xid", health="fail", xid=79))
    assert cordons.writer.queued == 1  # one decision in flight per node
    with pytest.raises(UnknownNode, match="'n9'"):
        await cordons.cordon("n9", "x", "alice")


async def test_a_newer_term_of_another_coordinator_deposes_us(coord) -> None:
    commands = coord.get(Commands)
    await coord.assume_term(term(5, "me"))
    coord.apply_state(STATE_COORDINATOR, TERM_KEY, term(5, "me"), "term")  # our own echo
    assert coord.is_leader and commands.dispatcher.epoch == 5
    coord.apply_state(STATE_COORDINATOR, TERM_KEY, term(6, "other"), "term")
    assert not coord.is_leader and commands.dispatcher.epoch is None and coord.leader_info().instance_id == "other"


def test_cordon_records_from_the_state_apply_in_time_order(coord) -> None:
    fleet = coord.get(FleetNodes)
    new = CordonRecord(node_id="n1", cordoned=False, reason="fixed", by="operator:a", time=10.0)
    old = CordonRecord(node_id="n1", cordoned=True, reason="xid", by="auto:fault", time=5.0)
    coord.apply_state(STATE_NODES, "n1", new, "cordon")
    coord.apply_state(STATE_NODES, "n1", old, "cordon")  # a late echo of an older decision
    assert not fleet.node("n1").cordoned
    coord.apply_state(STATE_NODES, "n1", None, "cordon")  # tombstone
    assert fleet.node("n1").cordon is None


# ---- a component added from outside: everything it declares reaches it -------------------------------------
class ToyConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    greeting: str = "hello"


class ToyRecord(msgspec.Struct, kw_only=True):
    n: int


class Toy(Component):
    """What a new component (jobs, say) looks like: a config section, a state topic, events, a tick, routes."""

    name = "toy"
    config = ToyConfig
    consumes = (ReleasePublished,)
    owns = (StateTopic(STATE_TOY, {"toy": ToyRecord}),)
    requires = (FleetNodes,)  # a narrow interface of a component listed before it

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.fleet = ctx.need(FleetNodes)
        self.seen: list[Any] = []
        self.failures_left = 0

    async def on_event(self, event, info) -> None:
        if self.failures_left:
            self.failures_left -= 1
            raise RuntimeError("toy bug")
        self.seen.append(("event", event.data.component))

    def on_state(self, topic, key, record, kind) -> None:
        self.seen.append(("state", key, record))

    async def tick(self, now: float) -> None:
        self.seen.append(("tick", len(self.fleet.nodes())))

    def api(self) -> RouteSet:
        async def hello(request: web.Request) -> web.Response:
            return web.json_response({"greeting": self.ctx.config.greeting})

        return RouteSet([web.get("/v1/toy", hello)], health=lambda: {"toy": True})


def toy_coordinator(tmp_path, **env: str) -> Coordinator:
    return offline_coordinator(tmp_path, components=(*COMPONENTS, Toy), **env)


async def test_a_new_component_gets_its_config_state_events_ticks_and_routes(tmp_path) -> None:
    coord = toy_coordinator(tmp_path, MYOLO_TOY_GREETING="hi")
    toy = coord.get(Toy)
    assert "myolo.releases" in coord.router.topics()
    await feed(coord, ReleasePublished(component="trainer", version="1.2.3", artifact="img"))
    coord.apply_state(STATE_TOY, "j1", ToyRecord(n=1), "toy")
    await feed(coord, sample())
    await coord.tick()
    assert toy.seen == [("event", "trainer"), ("state", "j1", ToyRecord(n=1)), ("tick", 1)]
    parts = [p for p in (c.api() for c in coord.peers) if p is not None]
    client = TestClient(TestServer(create_app(coord, parts, security())), headers=bearer(VIEWER))
    await client.start_server()
    try:
        assert await (await client.get("/v1/toy")).json() == {"greeting": "hi"}
        health = await (await client.get("/healthz")).json()
        assert health["toy"] is True and health["nodes"] == 1
    finally:
        await client.close()


async def test_a_failing_component_is_retried_alone(tmp_path) -> None:
    coord = toy_coordinator(tmp_path)
    toy = coord.get(Toy)
    toy.failures_left = 1
    event = new_event(ReleasePublished(component="trainer", version="1", artifact="i"), "ci", clock=coord.clock)
    with pytest.raises(ComponentError, match="toy: RuntimeError: toy bug"):
        await coord.router(event, INFO)
    await coord.router(event, INFO)  # the consumer's retry
    assert toy.seen == [("event", "trainer")]


async def test_a_failing_tick_does_not_stop_the_others(tmp_path, monkeypatch) -> None:
    coord = toy_coordinator(tmp_path)

    async def broken(now: float) -> None:
        raise RuntimeError("tick bug")

    monkeypatch.setattr(coord.get(Cordons), "tick", broken)
    await coord.tick()
    assert coord.get(Toy).seen == [("tick", 0)]


def test_declarations_that_clash_are_refused(tmp_path) -> None:
    class Thief(Toy):
        name = "thief"
        owns = (StateTopic(STATE_NODES, {"stolen": ToyRecord}),)

    class Twin(Toy):
        owns = ()

    with pytest.raises(ValueError, match="claimed by both cordons and thief"):
        offline_coordinator(tmp_path, components=(*COMPONENTS, Thief))
    with pytest.raises(ValueError, match="two components are named 'toy'"):
        offline_coordinator(tmp_path, components=(*COMPONENTS, Toy, Twin))


def test_the_document_covers_every_component() -> None:
    doc = openapi.for_components(COMPONENTS)
    assert {"/v1/nodes", "/v1/nodes/{node_id}/cordon", "/v1/commands", "/healthz"} <= set(doc["paths"])


class Stuck(Component):
    """A component whose tick waits on something that does not come (Kafka away, say)."""

    name = "stuck"

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.release = asyncio.Event()
        self.started = 0

    async def tick(self, now: float) -> None:
        self.started += 1
        await self.release.wait()


async def test_a_tick_that_waits_never_holds_back_another_component(tmp_path) -> None:
    clock = SimClock()
    coord = offline_coordinator(tmp_path, clock, components=(*COMPONENTS, Stuck, Toy), MYOLO_TICK_S="0.5")
    loop = asyncio.create_task(coord.tick_loop())
    await asyncio.sleep(0)  # the loop waits on the clock
    try:
        for _ in range(6):
            await clock.advance(0.5)
            for _ in range(5):
                await asyncio.sleep(0)
        assert [s for s in coord.get(Toy).seen if s[0] == "tick"] == [("tick", 0)] * 6  # every round
        assert coord.get(Stuck).started == 1 and coord.ticks_skipped == 5  # waits, skipping its rounds
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
    assert coord.get(Stuck).started == 1  # and its waiting tick was cancelled with the loop
