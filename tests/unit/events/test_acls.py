"""The ACL catalogue (myolo.events.acls): who may write and read each topic, and the grants rendered from it."""

from __future__ import annotations

from pathlib import Path

from myolo.agent.commands import command_group_id
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.cordons.records import STATE_NODES
from myolo.coordinator.core.config import LeaderConfig
from myolo.coordinator.core.coordinator import topic_specs
from myolo.events import acls
from myolo.events import topics as t

TOPICS = topic_specs(COMPONENTS)  # the events' catalogue and the coordinator's state topics


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


def test_the_production_doc_shows_the_grants_the_code_applies() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "security-kafka.md").read_text()
    for role, name in (("agent", "node-17"), ("coordinator", "coordinator-1")):
        for line in acls.kafka_acls_commands(role, name, "kafka-1:9093"):
            assert line in doc, f"docs/security-kafka.md lacks: {line}"
