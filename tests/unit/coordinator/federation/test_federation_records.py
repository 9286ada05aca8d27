"""The federation's contract: summaries count by node class; the epoch fence refuses a deposed writer."""

from __future__ import annotations

import msgspec

from myolo.coordinator.cordons.records import CordonRecord
from myolo.coordinator.federation.board import SummaryBoard
from myolo.coordinator.federation.fencing import EpochFence
from myolo.coordinator.federation.inbox import CellInbox
from myolo.coordinator.federation.records import CellIntent, FederationTerm, PlaceJob
from myolo.coordinator.federation.summary import summarize
from myolo.coordinator.fleet.model import NodeState
from myolo.events.examples import node_sample

GPUS = tuple(node_sample(gpus=8).gpus)
CLASS = f"{GPUS[0].name} x8"


def test_the_fence_refuses_only_an_older_epoch_per_writer() -> None:
    fence = EpochFence()
    assert fence.admit("a", 3) is None and fence.admit("a", 3) is None and fence.admit("a", 4) is None
    assert fence.admit("a", 3) == "epoch: 3 from 'a' is older than its epoch 4 already seen (a deposed leader)"
    assert fence.admit("b", 1) is None, "each writer has its own epochs"
    assert fence.refused == 1 and fence.newest == {"a": 4, "b": 1}


def test_a_summary_counts_nodes_by_class_and_gpus_where_work_can_go() -> None:
    cordon = CordonRecord(node_id="n2", cordoned=True, reason="xid 79", by="auto:fault", time=1.0)
    nodes = [
        NodeState(node_id="n0", gpus=GPUS, agent_version="4.0.0"),
        NodeState(node_id="n1", gpus=GPUS, agent_version="4.1.0", agent_on_trial="4.1.0"),
        NodeState(node_id="n2", gpus=GPUS, cordon=cordon),
        NodeState(node_id="n3", gpus=GPUS, liveness="Suspect"),
        NodeState(node_id="n4", gpus=GPUS[:4], liveness="Lost"),
        NodeState(node_id="n5"),
    ]
    s = summarize("a", 7, 100.0, nodes, held_gpus={"n0": 6})
    assert (s.cell, s.epoch, s.nodes) == ("a", 7, 6)
    by = {c.gpu: c for c in s.classes}
    assert set(by) == {CLASS, f"{GPUS[0].name} x4", "unknown"}
    eight = by[CLASS]
    assert (eight.nodes, eight.ready, eight.suspect, eight.lost, eight.cordoned) == (4, 3, 1, 0, 1)
    assert eight.schedulable == 2 and eight.gpus_schedulable == 2 + 8, "n0 holds 6 of its 8 for a job"
    assert eight.agents == {"4.0.0": 1, "4.1.0": 1, "unknown": 2} and eight.on_trial == 1
    assert by[f"{GPUS[0].name} x4"].lost == 1 and by["unknown"].gpus_schedulable == 0


def test_the_board_keeps_the_current_leaders_summary_and_refuses_bad_bytes() -> None:
    board = SummaryBoard()
    new = summarize("a", 2, 1.0, [NodeState(node_id="n", gpus=GPUS)])
    assert board.receive(msgspec.json.encode(new)) is None
    assert board.receive(msgspec.json.encode(summarize("a", 1, 2.0, []))).startswith("epoch: 1 from 'a'")
    assert board.by_cell["a"] == new and board.schedulable_gpus(CLASS) == {"a": 8}
    assert board.receive(b'{"cell": "a", "epoch": "two"}').startswith("summary: Expected `int`")


def test_a_cell_applies_its_own_intents_behind_the_federation_term() -> None:
    inbox = CellInbox("a")
    job = PlaceJob(epoch=3, job="j", gpu=CLASS, gpus=8)
    assert inbox.receive(msgspec.json.encode(CellIntent(cell="a", intent=FederationTerm(epoch=3, leader="f")))) is None
    assert inbox.receive(msgspec.json.encode(CellIntent(cell="a", intent=job))) is None
    old = PlaceJob(epoch=2, job="old", gpu=CLASS, gpus=8)
    assert inbox.receive(msgspec.json.encode(CellIntent(cell="a", intent=old))).startswith("epoch: 2")
    other = CellIntent(cell="b", intent=PlaceJob(epoch=3, job="x", gpu=CLASS, gpus=8))
    assert inbox.receive(msgspec.json.encode(other)) == "cell: 'b' is not this cell ('a')"
    assert inbox.receive(b"\xff").startswith("intent: ")
    assert inbox.applied == [job], "a term moves the fence and is not an action"
