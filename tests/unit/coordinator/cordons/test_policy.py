"""Which events cordon a node: FAIL faults and samples, Lost nodes; WARN only when configured."""

from __future__ import annotations

import msgspec
import pytest

from myolo.coordinator.cordons.policy import AUTO_FAULT, AUTO_LOST, CordonPolicy, operator_by, record
from myolo.coordinator.cordons.records import CordonRecord
from myolo.coordinator.fleet.interface import Transition
from myolo.coordinator.fleet.model import NodeState
from myolo.events.payloads import NodeFault, NodeSample


def fault(health: str, **kw) -> NodeFault:
    return NodeFault(node_id="n1", kind=kw.pop("kind", "xid"), health=health, **kw)


def test_fail_fault_cordons_with_the_reason() -> None:
    reason, by = CordonPolicy().for_fault(
        NodeState(node_id="n1"), fault("fail", xid=79, gpu_index=3, reasons=["fell off the bus"])
    )
    assert by == AUTO_FAULT and reason == "FAIL xid 79 on GPU 3: fell off the bus"


def test_warn_is_shown_not_acted_on_unless_configured() -> None:
    node = NodeState(node_id="n1")
    warn = fault("warn", kind="ecc", reasons=["corrected ECC rising"])
    assert CordonPolicy().for_fault(node, warn) is None
    assert CordonPolicy(act_on_warn=True).for_fault(node, warn) == ("WARN ecc: corrected ECC rising", AUTO_FAULT)
    assert CordonPolicy().for_fault(node, fault("ok")) is None


def test_an_existing_cordon_is_never_overwritten() -> None:
    node = NodeState(
        node_id="n1", cordon=CordonRecord(node_id="n1", cordoned=True, reason="fan", by="operator:a", time=0)
    )
    assert CordonPolicy().for_fault(node, fault("fail")) is None
    node = msgspec.structs.replace(
        node, cordon=CordonRecord(node_id="n1", cordoned=False, reason="fixed", by="operator:a", time=1)
    )
    assert CordonPolicy().for_fault(node, fault("fail")) is not None  # uncordoned nodes are cordoned again


def test_sample_with_fail_health_cordons() -> None:
    s = NodeSample(node_id="n1", backend="sim", gpus=[], health="fail", health_reasons=["GPU 0: XID 79"])
    assert CordonPolicy().for_sample(NodeState(node_id="n1"), s) == ("FAIL health in sample: GPU 0: XID 79", AUTO_FAULT)
    assert CordonPolicy().for_sample(NodeState(node_id="n1"), NodeSample(node_id="n1", backend="sim", gpus=[])) is None


def test_lost_cordons_suspect_does_not() -> None:
    node = NodeState(node_id="n1")
    assert CordonPolicy().for_transition(Transition(node, "Suspect", "Lost", 10.04)) == (
        "Lost: no sample for 10.0 s",
        AUTO_LOST,
    )
    assert CordonPolicy().for_transition(Transition(node, "Ready", "Suspect", 3.0)) is None


def test_operator_name_is_required() -> None:
    assert operator_by("alice") == "operator:alice" and operator_by("operator:bob") == "operator:bob"
    with pytest.raises(ValueError, match="by:"):
        operator_by("  ")
    rec = record("n1", True, "why", "operator:alice", 5.0, 7)
    assert (rec.cordoned, rec.epoch, rec.time) == (True, 7, 5.0)
