"""The ACL catalogue (events.acls), the SCRAM client and the secured broker's properties, without a broker."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from agent.commands import command_group_id
from coordinator.components import COMPONENTS
from coordinator.cordons.records import STATE_NODES
from coordinator.core.config import LeaderConfig
from coordinator.core.coordinator import topic_specs
from coordinator.localstack.broker import security
from coordinator.localstack.broker.scram import ScramClient, ScramError
from events import acls
from events import topics as t

TOPICS = topic_specs(COMPONENTS)  # the events' catalogue and the coordinator's state topics


def test_scram_client_matches_rfc_7677() -> None:
    client = ScramClient("user", "pencil", "SCRAM-SHA-256", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert client.final(server_first) == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(ScramError, match="signature is wrong"):
        client.verify(b"v=" + base64.b64encode(b"x" * 32))


def test_scram_client_refuses_a_server_nonce_that_is_not_ours() -> None:
    client = ScramClient("user", "pencil", nonce="abc")
    with pytest.raises(ScramError, match="nonce"):
        client.final(b"r=xyz123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")


def test_every_topic_has_a_writer_and_the_coordinator_reads_it() -> None:
    """A topic added to the catalogue without a line here would be unusable on a secured cluster."""
    roles = {"agent": "node-1", "coordinator": "coordinator-1", "producer": "producer"}
    for topic in TOPICS:
        granted = {role: acls.acls_for(role, name) for role, name in roles.items()}  # type: ignore[arg-type]
        assert acls.allows(granted["coordinator"], "topic", topic.name, "read"), topic.name
        if topic.name != t.LEADER:  # the leader topic is only a group's partition: nobody writes it
            assert any(acls.allows(g, "topic", topic.name, "write") for g in granted.values()), topic.name


def test_who_writes_what() -> None:
    agent, coordinator = acls.acls_for("agent", "node-1"), acls.acls_for("coordinator", "coordinator-1")
    producer, operator = acls.acls_for("producer", "producer"), acls.acls_for("operator", "operator")
    state_topics = [topic.name for topic in TOPICS if topic.compacted]
    for name in (t.COMMANDS, *state_topics):
        assert acls.allows(coordinator, "topic", name, "write")
        assert not acls.allows(agent, "topic", name, "write")
        assert not acls.allows(producer, "topic", name, "write")
    assert {topic.name for topic in TOPICS if acls.allows(producer, "topic", topic.name, "write")} == {
        t.DRIFT_SAMPLES,
        t.RELEASES,
    }
    assert not any(acls.allows(operator, "topic", topic.name, "write") for topic in TOPICS)
    assert acls.allows(agent, "topic", t.COMMANDS, "read") and not acls.allows(agent, "topic", STATE_NODES, "read")
    assert acls.acls_for("admin", "admin") == ()


def test_groups_are_the_ones_the_code_uses() -> None:
    assert acls.agent_group("node-7") == command_group_id("node-7")
    assert LeaderConfig().group_id == acls.LEADER_GROUP
    agent = acls.acls_for("agent", "node-1")
    assert acls.allows(agent, "group", command_group_id("node-1"), "read")
    assert not acls.allows(agent, "group", command_group_id("node-2"), "read")


def test_kafka_acls_commands_render_the_same_grants() -> None:
    lines = acls.kafka_acls_commands("producer", "serving", "kafka-1:9093")
    assert len(lines) == len(acls.acls_for("producer", "serving"))
    assert all("--allow-principal User:serving --operation Write --topic myolo." in line for line in lines)
    assert any("--resource-pattern-type prefixed" in line for line in acls.kafka_acls_commands("operator", "ops"))


def test_secured_properties_expose_no_unauthenticated_listener(tmp_path: Path) -> None:
    sec = security.create(tmp_path, use_tls=True)
    security.ensure_user(sec, "producer", "producer")
    security.ensure_user(sec, "node-1", "agent")
    props = security.broker_properties(sec, 9092, 9093)
    assert props["listener.security.protocol.map"] == "CLIENT:SASL_SSL,CONTROLLER:SASL_PLAINTEXT"
    assert props["super.users"] == "User:admin"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert "user_producer=" in props["listener.name.client.plain.sasl.jaas.config"]
    assert "user_node-1" not in props["listener.name.client.plain.sasl.jaas.config"]  # PLAIN: producers only
    assert oct(Path(sec.users["node-1"].password_file).stat().st_mode & 0o777) == "0o600"
    with pytest.raises(ValueError, match="already exists with role 'agent'"):
        security.ensure_user(sec, "node-1", "coordinator")
    plain = security.create(tmp_path / "plain", use_tls=False)
    security.ensure_user(plain, "producer", "producer")
    assert "listener.name.client.plain.sasl.jaas.config" not in security.broker_properties(plain, 1, 2)


def test_the_production_doc_shows_the_grants_the_code_applies() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "security-kafka.md").read_text()
    for role, name in (("agent", "node-17"), ("coordinator", "coordinator-1")):
        for line in acls.kafka_acls_commands(role, name, "kafka-1:9093"):
            assert line in doc, f"docs/security-kafka.md lacks: {line}"
