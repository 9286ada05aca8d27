"""Each state-owning component writes a decision to its state topic first and keeps it in memory only once
the write was taken: a refused write (the store raises) leaves memory as it was and acts on nothing. The
rollouts, jobs and retraining controllers have theirs beside their other tests."""

from __future__ import annotations

import pytest

from myolo.common.keys import Ed25519Signer
from myolo.coordinator.commands.records import STATE_COMMANDS
from myolo.coordinator.cordons.records import STATE_NODES
from myolo.coordinator.drift.component import Drift
from myolo.coordinator.drift.records import STATE_DRIFT
from myolo.coordinator.drift.rule import DriftRule
from myolo.coordinator.nodes.component import Nodes
from myolo.coordinator.nodes.records import STATE_NODE_KEYS
from myolo.coordinator.registry.component import Registry
from myolo.coordinator.registry.interface import NewVersion
from myolo.coordinator.registry.records import STATE_REGISTRY
from myolo.events.payloads import Command, CommandAck
from myolo.events.payloads.commands import DrainArgs
from tests.support.coordinator.failing import WriteRefused, refused_writes
from tests.support.coordinator.jobs_sim import JobSim


@pytest.fixture
async def sim(tmp_path):
    s = JobSim(tmp_path)
    await s.start()
    yield s
    await s.close()


async def test_commands_a_refused_intent_is_neither_kept_nor_sent(sim: JobSim) -> None:
    before = sim.commands.intents()
    with refused_writes(sim.coord.store, STATE_COMMANDS), pytest.raises(WriteRefused):
        await sim.commands.issue("n1", DrainArgs(reason="maintenance"))
    assert sim.commands.intents() == before and not sim.commands.has_pending("n1", "drain")
    assert not [c for c in sim.sent() if isinstance(c, Command) and c.action == "drain"]


async def test_commands_a_refused_ack_leaves_the_intent_as_it_was(sim: JobSim) -> None:
    intent = await sim.commands.issue("n1", DrainArgs(reason="maintenance"))
    (cmd,) = sim.sent("drain")
    with refused_writes(sim.coord.store, STATE_COMMANDS) as refused, pytest.raises(WriteRefused):
        await sim.commands.dispatcher.on_ack(_ack(cmd))
    assert refused == [intent.command_id]
    assert sim.commands.intent(intent.command_id) == intent and intent.status == "pending"


async def test_cordons_a_refused_cordon_does_not_cordon_the_node(sim: JobSim) -> None:
    with refused_writes(sim.coord.store, STATE_NODES), pytest.raises(WriteRefused):
        await sim.cordons.cordon("n2", "disk", "operator:alice")
    node = sim.fleet.node("n2")
    assert node is not None and not node.cordoned and node.schedulable


async def test_nodes_a_refused_enrolment_or_revocation_changes_no_key(sim: JobSim) -> None:
    nodes, key = sim.coord.get(Nodes), Ed25519Signer.generate()
    with refused_writes(sim.coord.store, STATE_NODE_KEYS), pytest.raises(WriteRefused):
        await nodes.enroll("n1", key.public.pem(), "admin:alice")
    assert nodes.key_of("n1") is None
    enrolled, _ = await nodes.enroll("n1", key.public.pem(), "admin:alice")
    with refused_writes(sim.coord.store, STATE_NODE_KEYS), pytest.raises(WriteRefused):
        await nodes.revoke("n1", "admin:alice")
    assert nodes.key_of("n1") == enrolled and not enrolled.revoked


async def test_registry_a_refused_model_version_or_alias_is_not_in_the_registry(sim: JobSim, tmp_path) -> None:
    registry = sim.coord.get(Registry)
    new = NewVersion(artifact=str(tmp_path / "v1.safetensors"), sha256="a" * 64)
    with refused_writes(sim.coord.store, STATE_REGISTRY):
        with pytest.raises(WriteRefused):
            await registry.put_model("m", "a model", None, None, "operator:alice")
        assert registry.model("m") is None
        with pytest.raises(WriteRefused):
            await registry.register("m", new, "operator:alice")
        assert registry.versions("m") == ()
    v1 = await registry.register("m", new, "operator:alice")
    model = registry.model("m")
    with refused_writes(sim.coord.store, STATE_REGISTRY), pytest.raises(WriteRefused):
        await registry.set_alias("m", "champion", v1.version, "operator:alice", "first")
    assert registry.alias("m", "champion") is None and registry.model("m") == model


async def test_drift_a_refused_rule_is_not_applied(sim: JobSim) -> None:
    drift = sim.coord.get(Drift)
    rule = DriftRule(window_s=600, every_s=60, buckets=5, consecutive=2, reference_count=1000, min_count=100)
    with refused_writes(sim.coord.store, STATE_DRIFT), pytest.raises(WriteRefused):
        await drift.set_rule("m", rule, "operator:alice")
    assert drift.rules == {} and drift.rule("m") == drift.cfg.rule
    mine = await drift.set_rule("m", rule, "operator:alice")
    with refused_writes(sim.coord.store, STATE_DRIFT), pytest.raises(WriteRefused):
        await drift.set_rule("m", None, "operator:alice")
    assert drift.rules == {"m": mine}


def _ack(cmd: Command) -> CommandAck:
    return CommandAck(command_id=cmd.command_id, node_id=cmd.node_id, epoch=cmd.epoch, status="done")
