"""The local Apache Kafka broker and `myoloctl local up|down|status`, against real processes."""

from __future__ import annotations

import json
import socket
import stat
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from typer.testing import CliRunner

from myolo.coordinator.cli.main import app as myoloctl
from myolo.coordinator.localstack.broker import BrokerError, LocalBroker, answers_metadata, fetch_metadata, state
from myolo.coordinator.localstack.broker.jars import ensure_jars
from myolo.coordinator.localstack.broker.java import find_java, parse_major


def _host_port(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def _pids_with(marker: str) -> list[int]:
    """Every live process whose command line mentions `marker` (our broker's properties path)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = entry.joinpath("cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline and "kafka.Kafka" in cmdline:
                found.append(int(entry.name))
    return found


@pytest.mark.kafka
async def test_broker_answers_metadata_from_our_probe_and_aiokafka(kafka: LocalBroker) -> None:
    host, port = _host_port(kafka.bootstrap)
    assert host == "127.0.0.1"
    meta = fetch_metadata(host, port)
    assert [(b.host, b.port) for b in meta.brokers] == [(host, port)]
    assert meta.cluster_id == kafka.identity.cluster_id

    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    await admin.start()
    try:
        cluster = await admin.describe_cluster()
    finally:
        await admin.close()
    assert cluster["cluster_id"] == meta.cluster_id
    assert [(b["host"], b["port"]) for b in cluster["brokers"]] == [(host, port)]


@pytest.mark.kafka
def test_start_twice_does_not_start_a_second_broker(kafka: LocalBroker) -> None:
    pid = kafka.status().pid
    marker = str(kafka.properties_path)
    assert _pids_with(marker) == [pid]
    assert kafka.start() is False
    assert LocalBroker(kafka.state_dir).start() is False  # another handle, as another process would
    assert kafka.status().pid == pid
    assert _pids_with(marker) == [pid]
    state = json.loads((kafka.state_dir / "stack.json").read_text())
    assert [(p["name"], p["role"], p["pid"]) for p in state["processes"]] == [("kafka", "broker", pid)]
    assert state["bootstrap"] == kafka.bootstrap


@pytest.mark.kafka
async def test_restart_keeps_topics_and_records(kafka: LocalBroker) -> None:
    topic = "broker-restart-check"
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap, acks="all")
    await producer.start()
    await producer.send_and_wait(topic, b"before-restart", key=b"k")
    await producer.stop()

    bootstrap, old_pid = kafka.bootstrap, kafka.status().pid
    assert kafka.stop() is True
    assert kafka.status().running is False
    assert answers_metadata(*_host_port(bootstrap)) is None
    assert kafka.start() is True
    assert kafka.bootstrap == bootstrap
    assert kafka.status().running and kafka.status().pid != old_pid

    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    await admin.start()
    try:
        assert topic in await admin.list_topics()
    finally:
        await admin.close()
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=kafka.bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        batches = await consumer.getmany(timeout_ms=10_000)
        values = [record.value for records in batches.values() for record in records]
    finally:
        await consumer.stop()
    assert values == [b"before-restart"]


@pytest.mark.kafka
def test_cli_up_status_down(tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"MYOLO_STATE_DIR": str(tmp_path)}
    try:
        first = runner.invoke(myoloctl, ["local", "up"], env=env)
        assert first.exit_code == 0, first.output
        broker = LocalBroker(tmp_path)
        assert "Kafka started" in first.output
        assert broker.bootstrap in first.output
        assert str(broker.log_path) in first.output
        pid = broker.status().pid

        again = runner.invoke(myoloctl, ["local", "up"], env=env)
        assert again.exit_code == 0, again.output
        assert "already running" in again.output and broker.bootstrap in again.output
        assert _pids_with(str(broker.properties_path)) == [pid]

        running = runner.invoke(myoloctl, ["local", "status"], env=env)
        assert running.exit_code == 0, running.output
        assert "Kafka running" in running.output and broker.bootstrap in running.output

        down = runner.invoke(myoloctl, ["local", "down"], env=env)
        assert down.exit_code == 0, down.output
        assert f"Kafka stopped (pid {pid})" in down.output
        assert _pids_with(str(broker.properties_path)) == []

        stopped = runner.invoke(myoloctl, ["local", "status"], env=env)
        assert stopped.exit_code == 1
        assert "Kafka not running" in stopped.output

        clean = runner.invoke(myoloctl, ["local", "down", "--clean"], env=env)
        assert clean.exit_code == 0 and "was not running" in clean.output
        assert not broker.home.exists()
    finally:
        LocalBroker(tmp_path).clean()


@pytest.mark.kafka
def test_busy_port_is_refused_with_a_hint(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(BrokerError) as caught:
            LocalBroker(tmp_path, port=port, tied_to_parent=True).start()
        assert f"127.0.0.1:{port} is already in use" in str(caught.value)
        assert "--port" in caught.value.hint

        result = CliRunner().invoke(myoloctl, ["local", "up", "--port", str(port), "--state-dir", str(tmp_path)])
        assert result.exit_code == 1
        assert "already in use" in result.output and "hint:" in result.output
    assert LocalBroker(tmp_path).status().running is False
    assert state.load(tmp_path).processes == []
    assert not (tmp_path / "kafka" / "broker.json").exists()  # the busy port is not remembered


class Squatter:
    """Another process taking one of the broker's ports between the check that it is free and the JVM binding
    it: the race of a port picked free, made certain. It listens there from the first formatting of the
    storage on (later launches find the port taken before they start)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, which: str) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the broker's check binds
        self.port: int | None = None
        format_storage = LocalBroker._format_storage

        def then_take(broker: LocalBroker, java: Path, lib: Path, identity: Any) -> None:
            format_storage(broker, java, lib, identity)
            if self.port is None:
                self.port = getattr(identity, which)
                if self.sock.getsockname()[1] != self.port:
                    self.sock.bind(("127.0.0.1", self.port))
                self.sock.listen()

        monkeypatch.setattr(LocalBroker, "_format_storage", then_take)

    def reserve(self) -> int:
        """A port to give the broker: bound now, not listening, so the broker's check passes and no other
        process takes it first."""
        self.sock.bind(("127.0.0.1", 0))
        return self.sock.getsockname()[1]


@pytest.mark.kafka
def test_a_picked_port_taken_before_the_broker_binds_it_is_replaced_and_kept_on_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    squatter = Squatter(monkeypatch, "port")
    broker = LocalBroker(tmp_path, tied_to_parent=True)
    try:
        assert broker.start() is True
        assert squatter.port is not None and broker.identity.port != squatter.port
        assert broker.status().running and answers_metadata(*_host_port(broker.bootstrap)) is not None
        assert f"failed to bind to 127.0.0.1:{squatter.port}" in broker.log_path.read_text()  # it lost the race
        bootstrap, identity = broker.bootstrap, broker.identity

        # a restart keeps its ports: one taken meanwhile is an error naming it, never a silent move
        assert broker.stop() is True
        with socket.socket() as other:
            other.bind(("127.0.0.1", identity.port))
            other.listen()
            with pytest.raises(BrokerError) as caught:
                broker.start()
            assert f"Kafka client port 127.0.0.1:{identity.port} is already in use" in str(caught.value)
            assert broker.identity == identity
        assert broker.start() is True
        assert broker.bootstrap == bootstrap and broker.identity == identity
    finally:
        squatter.sock.close()
        broker.clean()


@pytest.mark.kafka
def test_a_given_port_taken_before_the_broker_binds_it_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    squatter = Squatter(monkeypatch, "controller_port")
    given = squatter.reserve()
    broker = LocalBroker(tmp_path, controller_port=given, tied_to_parent=True)
    launches: list[int] = []
    launch = LocalBroker._launch
    monkeypatch.setattr(LocalBroker, "_launch", lambda self, *a: launches.append(1) or launch(self, *a))
    try:
        with pytest.raises(BrokerError) as caught:
            broker.start()
        assert f"Kafka controller port 127.0.0.1:{given} is already in use" in str(caught.value)
        assert "--controller-port" in caught.value.hint
        assert f"failed to bind to 127.0.0.1:{given}" in caught.value.detail
        assert launches == [1]  # the caller's port is not ours to change: no second try
        assert broker.status().running is False and _pids_with(str(broker.properties_path)) == []
        assert not (tmp_path / "kafka" / "broker.json").exists()  # the busy port is not remembered
    finally:
        squatter.sock.close()
        broker.clean()


@pytest.mark.kafka
def test_broker_dying_on_start_reports_its_log(tmp_path: Path) -> None:
    # The storage tool accepts this; the broker fails when it instantiates the authorizer.
    broken = LocalBroker(
        tmp_path, tied_to_parent=True, properties={"authorizer.class.name": "ai.myolo.NoSuchAuthorizer"}
    )
    try:
        with pytest.raises(BrokerError) as caught:
            broken.start()
        assert "exited while starting" in str(caught.value)
        assert str(broken.log_path) in caught.value.hint
        assert "ClassNotFoundException: ai.myolo.NoSuchAuthorizer" in caught.value.detail
        assert broken.status().running is False
        assert _pids_with(str(broken.properties_path)) == []
    finally:
        broken.clean()


def test_missing_java_is_explained(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    with pytest.raises(BrokerError) as caught:
        find_java()
    assert "JAVA_HOME" in str(caught.value)
    assert "openjdk-17-jre-headless" in caught.value.hint

    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BrokerError) as caught:
        find_java()
    assert "Java was not found" in str(caught.value)
    assert "JAVA_HOME" in caught.value.hint


def test_old_java_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "jdk11" / "bin" / "java"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\necho 'openjdk version \"11.0.22\" 2024-01-16' >&2\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk11"))
    with pytest.raises(BrokerError) as caught:
        find_java()
    assert "Java 11.0.22" in str(caught.value) and "too old" in str(caught.value)
    assert parse_major('java version "1.8.0_392"') == (8, "1.8.0_392")
    assert parse_major('openjdk version "21" 2023-09-19') == (21, "21")


def test_unreachable_maven_registry_shows_mavens_words(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A private Maven home whose only repository is a closed local port: Maven itself fails to connect.
    home = tmp_path / "home"
    (home / ".m2").mkdir(parents=True)
    (home / ".m2" / "settings.xml").write_text(
        "<settings><mirrors><mirror><id>nowhere</id><mirrorOf>*</mirrorOf>"
        "<url>http://127.0.0.1:9/maven2</url></mirror></mirrors></settings>"
    )
    monkeypatch.setenv("MAVEN_OPTS", f"-Duser.home={home}")
    monkeypatch.setenv("MYOLO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MYOLO_KAFKA_LIB", raising=False)
    with pytest.raises(BrokerError) as caught:
        ensure_jars("4.1.2")
    assert "Maven could not fetch Apache Kafka 4.1.2" in str(caught.value)
    assert "repo.maven.apache.org" in caught.value.hint
    assert "Connection refused" in caught.value.detail
    assert not (tmp_path / "cache" / "kafka-4.1.2" / "complete.json").exists()


def test_missing_maven_is_explained(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("MYOLO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MYOLO_KAFKA_LIB", raising=False)
    with pytest.raises(BrokerError) as caught:
        ensure_jars("4.1.2")
    assert "Maven (mvn) is not installed" in str(caught.value)
    assert "apt-get install maven" in caught.value.hint
