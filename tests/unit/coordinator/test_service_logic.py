"""The service's decisions without a broker (nothing here starts a Kafka client): who may write, what a
FAIL fault or a newer term recorded by another coordinator does. The same paths with the real broker and
real processes: tests/integration/coordinator/."""

from __future__ import annotations

import pytest

from coordinator.config import load_coordinator_config
from coordinator.fleet.model import CordonRecord
from coordinator.leader.errors import NotLeader, UnknownNode
from coordinator.service import CoordinatorService
from coordinator.state import TERM_KEY, LeaderTerm
from events.bus import RecordInfo
from events.clock import SimClock
from events.envelope import new_event
from events.payloads import GpuReading, NodeFault, NodeSample
from events.topics import STATE_COMMANDS, STATE_NODES

INFO = RecordInfo("t", 0, 0)


@pytest.fixture
def svc(tmp_path) -> CoordinatorService:
    key = tmp_path / "k"
    key.write_text("11" * 32)
    env = {"MYOLO_SIGNING_KEY_FILE": str(key), "MYOLO_INSTANCE_ID": "me", "MYOLO_KAFKA_BOOTSTRAP": "127.0.0.1:1"}
    return CoordinatorService(load_coordinator_config(None, env=env), SimClock())


def term(epoch: int, who: str) -> LeaderTerm:
    return LeaderTerm(epoch=epoch, instance_id=who, api_url=f"http://{who}:8480", started=0.0)


async def feed(svc: CoordinatorService, payload) -> None:
    await svc._on_event(new_event(payload, "agent", clock=svc.clock), INFO)


async def test_a_standby_redirects_writes_to_the_recorded_leader(svc) -> None:
    with pytest.raises(NotLeader) as exc:
        await svc.cordon("n1", "x", "alice")
    assert exc.value.leader_url is None and "retry shortly" in str(exc.value)
    svc._apply_state(STATE_COMMANDS, TERM_KEY, term(4, "other"), "term")
    with pytest.raises(NotLeader) as exc:
        await svc.uncordon("n1", "x", "alice")
    assert exc.value.leader_url == "http://other:8480" and exc.value.leader_id == "other"
    info = svc.leader_info()
    assert (info.instance_id, info.epoch, info.is_self) == ("other", 4, False)


async def test_only_the_leader_reacts_to_a_fail_fault(svc) -> None:
    await feed(svc, NodeSample(node_id="n1", backend="sim", gpus=[GpuReading(index=0, uuid="G", name="sim")]))
    await feed(svc, NodeFault(node_id="n1", kind="xid", health="fail", xid=79))
    assert svc.reactor._queue.qsize() == 0 and svc.node("n1").health == "fail"  # shown, not acted on
    svc.term = term(5, "me")
    await feed(svc, NodeFault(node_id="n1", kind="xid", health="fail", xid=79))
    await feed(svc, NodeFault(node_id="n1", kind="xid", health="fail", xid=79))
    assert svc.reactor._queue.qsize() == 1  # one decision in flight per node
    with pytest.raises(UnknownNode, match="'n9'"):
        await svc.cordon("n9", "x", "alice")


async def test_a_newer_term_of_another_coordinator_deposes_us(svc) -> None:
    svc.term = term(5, "me")
    svc.dispatcher.epoch = 5
    svc._apply_state(STATE_COMMANDS, TERM_KEY, term(5, "me"), "term")  # our own echo
    assert svc.is_leader
    svc._apply_state(STATE_COMMANDS, TERM_KEY, term(6, "other"), "term")
    assert not svc.is_leader and svc.dispatcher.epoch is None and svc.leader_info().instance_id == "other"


def test_cordon_records_from_the_state_apply_in_time_order(svc) -> None:
    new = CordonRecord(node_id="n1", cordoned=False, reason="fixed", by="operator:a", time=10.0)
    old = CordonRecord(node_id="n1", cordoned=True, reason="xid", by="auto:fault", time=5.0)
    svc._apply_state(STATE_NODES, "n1", new, "cordon")
    svc._apply_state(STATE_NODES, "n1", old, "cordon")  # a late echo of an older decision
    assert not svc.node("n1").cordoned
    svc._apply_state(STATE_NODES, "n1", None, "cordon")  # tombstone
    assert svc.node("n1").cordon is None
