"""The secured broker: SASL/SCRAM over TLS, the StandardAuthorizer, and the ACLs of each role.

One secured broker for the module (LocalBroker(secure=True)), with two agents, a coordinator, an external
producer and an operator's tool as users. Each role does what it must, through our own producer and consumer
(aiokafka) and through kcat (librdkafka) as the external producer; everything else is refused by the broker.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    TopicAuthorizationFailedError,
)

from myolo.coordinator.commands.records import STATE_COMMANDS
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.cordons.records import STATE_NODES
from myolo.coordinator.core.coordinator import topic_specs
from myolo.coordinator.core.leadership import STATE_COORDINATOR
from myolo.coordinator.localstack.broker import BrokerError, LocalBroker, admin, security
from myolo.coordinator.localstack.broker.ports import HOST
from myolo.coordinator.localstack.broker.probe import ProbeError, fetch_metadata
from myolo.coordinator.localstack.broker.security import StackSecurity
from myolo.coordinator.localstack.broker.wire import AuthenticationError, Connection, Credentials
from myolo.events import acls
from myolo.events import topics as t
from myolo.events.bus import EventProducer
from myolo.events.settings import KafkaSettings
from myolo.events.topics import ensure_topics
from tests.support.helpers import KCAT

pytestmark = pytest.mark.kafka

USERS: dict[str, acls.Role] = {
    "node-1": "agent",
    "node-2": "agent",
    "coordinator-1": "coordinator",
    "producer": "producer",
    "operator": "operator",
}
REFUSED = (TopicAuthorizationFailedError, ClusterAuthorizationFailedError, GroupAuthorizationFailedError)

TOPICS = topic_specs(COMPONENTS)  # the events' catalogue and the coordinator's state topics


@pytest.fixture(scope="module")
def secured() -> Iterator[tuple[LocalBroker, StackSecurity]]:
    state_dir = Path(tempfile.mkdtemp(prefix="myolo-test-kafka-secure-"))
    broker = LocalBroker(state_dir, tied_to_parent=True, secure=True, users=USERS)
    try:
        broker.start()
        sec = broker.security
        assert sec is not None
        asyncio.run(ensure_topics(settings_for(broker, sec, security.ADMIN).client_kwargs(), TOPICS))
    except BrokerError as err:
        broker.clean()
        shutil.rmtree(state_dir, ignore_errors=True)
        pytest.fail(f"cannot start the secured test broker: {err.render()}", pytrace=False)
    try:
        yield broker, sec
    finally:
        broker.clean()
        shutil.rmtree(state_dir, ignore_errors=True)


def settings_for(broker: LocalBroker, sec: StackSecurity, name: str) -> KafkaSettings:
    return KafkaSettings(bootstrap=broker.bootstrap, client_id=name, **sec.client_fields(name))


def as_user(secured: tuple[LocalBroker, StackSecurity], name: str) -> KafkaSettings:
    return settings_for(*secured, name)


async def write(settings: KafkaSettings, topic: str, key: bytes = b"k", value: bytes = b"{}") -> None:
    """One record through our own producer (idempotent, acks=all), as every process of ours writes."""
    async with EventProducer(settings, source="test/secure") as producer:
        await asyncio.wait_for(producer.send_raw(topic, value, key, []), 30)


async def read(settings: KafkaSettings, topic: str, group: str | None) -> list[bytes]:
    """The values of ``topic`` from the beginning, in ``group`` (committing) or without one."""
    consumer = AIOKafkaConsumer(
        topic, **settings.client_kwargs(), group_id=group, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    try:
        batch = await asyncio.wait_for(consumer.getmany(timeout_ms=3000), 30)
        if group:
            await consumer.commit()
        return [r.value for records in batch.values() for r in records]
    finally:
        await consumer.stop()


async def test_each_role_does_what_it_must(secured) -> None:
    coordinator, agent, producer, operator = (
        as_user(secured, n) for n in ("coordinator-1", "node-1", "producer", "operator")
    )
    marker = uuid.uuid4().hex.encode()
    await write(coordinator, t.COMMANDS, b"node-1", marker)
    await write(coordinator, STATE_NODES, b"node-1", marker)
    await write(coordinator, t.DEAD_LETTER)
    await write(coordinator, t.AUDIT)
    for topic in acls.AGENT_WRITES:
        await write(agent, topic, b"node-1", marker)
    for topic in acls.PRODUCER_WRITES:
        await write(producer, topic, b"model", marker)
    assert marker in await read(agent, t.COMMANDS, acls.agent_group("node-1"))  # its commands, in its group
    assert marker in await read(coordinator, t.NODE_SAMPLES, acls.coordinator_group("coordinator-1"))
    assert marker in await read(coordinator, t.DRIFT_SAMPLES, acls.LEADER_GROUP)
    assert marker in await read(operator, STATE_NODES, None)  # `myoloctl events tail` reads without a group
    assert marker in await read(operator, t.COMMAND_ACKS, "myolo-ops-dashboard")


@pytest.mark.parametrize("topic", [t.COMMANDS, STATE_COMMANDS, STATE_COORDINATOR, t.NODE_FAULTS, t.COMMAND_ACKS])
async def test_an_external_producer_may_write_only_drift_samples_and_releases(secured, topic: str) -> None:
    with pytest.raises(TopicAuthorizationFailedError):
        await write(as_user(secured, "producer"), topic)


async def test_an_external_producer_reads_nothing(secured) -> None:
    with pytest.raises(TopicAuthorizationFailedError):
        await read(as_user(secured, "producer"), t.DRIFT_SAMPLES, None)


@pytest.mark.parametrize("topic", [t.COMMANDS, STATE_NODES, STATE_COMMANDS, STATE_COORDINATOR, t.RELEASES])
async def test_an_agent_cannot_write_commands_state_or_releases(secured, topic: str) -> None:
    with pytest.raises(TopicAuthorizationFailedError):
        await write(as_user(secured, "node-1"), topic)


async def test_an_agent_reads_only_commands_and_only_in_its_own_group(secured) -> None:
    agent = as_user(secured, "node-1")
    with pytest.raises(GroupAuthorizationFailedError):
        await read(agent, t.COMMANDS, acls.agent_group("node-2"))
    with pytest.raises(TopicAuthorizationFailedError):
        await read(agent, STATE_NODES, acls.agent_group("node-1"))
    with pytest.raises(TopicAuthorizationFailedError):
        await read(agent, t.NODE_FAULTS, None)


@pytest.mark.parametrize("topic", [topic.name for topic in TOPICS])
async def test_the_operators_tool_cannot_write_anything(secured, topic: str) -> None:
    with pytest.raises(REFUSED):
        await write(as_user(secured, "operator"), topic)


async def test_the_operators_tool_uses_only_its_own_groups(secured) -> None:
    with pytest.raises(GroupAuthorizationFailedError):
        await read(as_user(secured, "operator"), t.COMMANDS, acls.agent_group("node-1"))


async def test_a_coordinator_cannot_join_another_coordinators_group(secured) -> None:
    with pytest.raises(GroupAuthorizationFailedError):
        await read(as_user(secured, "coordinator-1"), t.NODE_SAMPLES, acls.coordinator_group("coordinator-2"))


async def test_a_wrong_password_or_no_login_is_refused(secured) -> None:
    broker, sec = secured
    wrong = Credentials("node-1", "not-the-password", ca_file=Path(sec.ca_file or ""))
    with pytest.raises(AuthenticationError, match="invalid credentials"):
        Connection(HOST, broker.identity.port, wrong).close()
    bad = KafkaSettings(
        bootstrap=broker.bootstrap, security_protocol="SASL_SSL", sasl_username="node-1", sasl_password="wrong",
        ssl_ca_file=sec.ca_file, request_timeout_ms=5000,
    )  # fmt: skip
    with pytest.raises(KafkaConnectionError):
        await write(bad, t.NODE_SAMPLES)
    for port in (broker.identity.port, broker.identity.controller_port):  # nobody gets in unauthenticated
        with pytest.raises(ProbeError):
            fetch_metadata(HOST, port)


def test_the_broker_holds_exactly_the_catalogues_acls_and_applying_again_changes_nothing(secured) -> None:
    broker, sec = secured
    wanted = {acl for name, role in USERS.items() for acl in acls.acls_for(role, name)}
    assert security.apply(sec, broker.identity.port) == len(wanted)
    with Connection(HOST, broker.identity.port, sec.credentials()) as conn:
        assert admin.describe_acls(conn) == wanted
    assert oct(Path(sec.users["node-1"].password_file).stat().st_mode & 0o777) == "0o600"
    assert oct(broker.properties_path.stat().st_mode & 0o777) == "0o600"  # it holds the admin's password


def _kcat(secured, user: str, *args: str, value: bytes = b"") -> subprocess.CompletedProcess:
    assert KCAT is not None, "kcat is not installed: `make sysdeps` (or apt-get install kcat) installs it"
    broker, sec = secured
    # PLAIN: librdkafka before 2.6.1 (Debian 12's kcat) answers SCRAM in a way Kafka 4 refuses
    cmd = [
        KCAT, "-b", broker.bootstrap, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=PLAIN",
        "-X", f"ssl.ca.location={sec.ca_file}", "-X", f"sasl.username={user}",
        "-X", f"sasl.password={Path(sec.users[user].password_file).read_text().strip()}", *args,
    ]  # fmt: skip
    return subprocess.run(cmd, input=value, capture_output=True, timeout=60, check=False)


async def test_kcat_as_the_external_producer_writes_drift_samples_and_is_refused_commands(secured) -> None:
    marker = uuid.uuid4().hex.encode()
    done = _kcat(secured, "producer", "-P", "-t", t.DRIFT_SAMPLES, "-k", "model-a", value=marker)
    assert done.returncode == 0, done.stderr
    assert marker in await read(as_user(secured, "coordinator-1"), t.DRIFT_SAMPLES, None)
    refused = _kcat(secured, "producer", "-P", "-t", t.COMMANDS, "-k", "node-1", value=b"{}")
    assert refused.returncode != 0 and b"Topic authorization failed" in refused.stderr, refused.stderr
    refused = _kcat(secured, "producer", "-C", "-t", t.COMMANDS, "-o", "beginning", "-e")
    assert b"Topic authorization failed" in refused.stderr, refused.stderr


def test_only_the_producer_role_may_log_in_with_plain(secured) -> None:
    refused = _kcat(secured, "node-1", "-L")
    assert refused.returncode != 0 and b"Invalid username or password" in refused.stderr, refused.stderr
