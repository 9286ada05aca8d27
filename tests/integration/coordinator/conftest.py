"""Fixtures for coordinator tests against the real session broker (see tests/conftest.py)."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from myolo.common.clock import Clock, SimClock
from myolo.coordinator.cli.main import app
from myolo.coordinator.commands.component import Commands
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.config import load_coordinator_config
from myolo.coordinator.cordons.component import Cordons
from myolo.coordinator.core.component import Component
from myolo.coordinator.core.config import CoreConfig
from myolo.coordinator.core.coordinator import Coordinator, state_codec
from myolo.coordinator.fleet.component import Fleet
from myolo.coordinator.localstack.broker import LocalBroker
from myolo.events.bus import EventProducer
from myolo.events.settings import KafkaSettings
from tests.support.api_auth import write_tokens
from tests.support.helpers import new_ed25519_key, wait_until
from tests.support.helpers import read_topic as read_records


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    """The coordinators' Ed25519 key (0600), its public half beside it as ``coordinator.key.pub``."""
    p = tmp_path / "coordinator.key"
    new_ed25519_key(p)
    return p


@pytest.fixture
def api_tokens(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The API's tokens file (as `myoloctl token create` writes it) and a token per person: vic is a viewer,
    olive an operator, ada an admin (tests/support/api_auth.py)."""
    path = tmp_path / "api-tokens"
    return path, write_tokens(path)


@pytest.fixture
def make_config(settings: KafkaSettings, key_file: Path, api_tokens) -> Callable[..., CoreConfig]:
    """A config for one test: its own leader group, so tests never compete for leadership; with the API enabled
    (MYOLO_API_ENABLED="true"), its callers need the tokens of ``api_tokens``."""
    group = f"lead-{uuid.uuid4().hex[:8]}"

    def make(instance: str, **env: str) -> CoreConfig:
        base = {
            "MYOLO_INSTANCE_ID": instance,
            "MYOLO_KAFKA_BOOTSTRAP": settings.bootstrap,
            "MYOLO_SIGNING_KEY_FILE": str(key_file),
            "MYOLO_LEADER_GROUP_ID": group,
            "MYOLO_API_ENABLED": "false",
            "MYOLO_API_TOKENS_FILE": str(api_tokens[0]),
            "MYOLO_FLEET_REQUEST_SAMPLE_ON_SUSPECT": "false",
        }
        return load_coordinator_config(None, components=COMPONENTS, env={**base, **env})

    return make


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[tuple[LocalBroker, LocalBroker]]:
    """Two brokers of their own (the session's holds other tests' state, sealed with other keys)."""
    pair = (LocalBroker(tmp_path / "src", tied_to_parent=True), LocalBroker(tmp_path / "dst", tied_to_parent=True))
    try:
        for b in pair:
            b.start()
        yield pair
    finally:
        for b in pair:
            b.clean()
        shutil.rmtree(tmp_path / "src", ignore_errors=True)
        shutil.rmtree(tmp_path / "dst", ignore_errors=True)


def cluster_config(
    bootstrap: str, key: Path, name: str, components: Sequence[type[Component]] = COMPONENTS
) -> CoreConfig:
    """A coordinator of ``components`` on a broker of ``brokers``: its own leader group, no API."""
    env = {
        "MYOLO_INSTANCE_ID": name,
        "MYOLO_KAFKA_BOOTSTRAP": bootstrap,
        "MYOLO_SIGNING_KEY_FILE": str(key),
        "MYOLO_LEADER_GROUP_ID": f"lead-{name}",
        "MYOLO_API_ENABLED": "false",
        "MYOLO_FLEET_REQUEST_SAMPLE_ON_SUSPECT": "false",
    }
    return load_coordinator_config(None, components=components, env=env)


def fleet(coord: Coordinator) -> Fleet:
    return coord.get(Fleet)


def cordons(coord: Coordinator) -> Cordons:
    return coord.get(Cordons)


def commands(coord: Coordinator) -> Commands:
    return coord.get(Commands)


class Services:
    """Coordinators started in this process (stopped at the end of the test)."""

    def __init__(self) -> None:
        self.running: list[Coordinator] = []

    async def start(self, cfg: CoreConfig, clock: Clock) -> Coordinator:
        svc = Coordinator(cfg, COMPONENTS, clock)
        await svc.start()
        self.running.append(svc)
        return svc

    async def stop(self, svc: Coordinator) -> None:
        self.running.remove(svc)
        await svc.stop()


@pytest.fixture
async def services() -> AsyncIterator[Services]:
    s = Services()
    yield s
    for svc in list(s.running):
        await s.stop(svc)


@pytest.fixture
def clock() -> SimClock:
    """Simulated time shared by the coordinators under test and the `producer` playing the agents."""
    return SimClock()


@pytest.fixture
async def producer(settings: KafkaSettings, clock: SimClock) -> AsyncIterator[EventProducer]:
    async with EventProducer(settings, source="test/agent", clock=clock) as p:
        yield p


async def read_topic(settings: KafkaSettings, topic: str) -> list:
    """Every record of a topic, from the beginning: [(key, value, headers)]."""
    return [(r.key.decode() if r.key else None, r.value, r.headers) for r in await read_records(settings, topic)]


async def state_records(settings: KafkaSettings, topic: str, key: str) -> list:
    codec = state_codec(COMPONENTS)
    return [codec.decode(v, h) for k, v, h in await read_topic(settings, topic) if k == key and v is not None]


async def one_leader(*svcs: Coordinator, timeout: float = 60.0) -> Coordinator:
    """Wait until every coordinator joined the same generation of the leader group and one leads in it (a
    member joining makes the group rebalance, which may move leadership: only then is it settled)."""

    def settled() -> bool:
        gens = {s.elector.generation for s in svcs}
        leaders = [s for s in svcs if s.is_leader]
        return len(gens) == 1 and len(leaders) == 1 and leaders[0].leadership.term.generation == next(iter(gens))

    await wait_until(settled, timeout, "one settled leader")
    return next(s for s in svcs if s.is_leader)


@pytest.fixture
def local_myoloctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    """``myoloctl ARGS...`` in-process against a local stack kept in ``tmp_path`` (nothing from this shell's
    MYOLO_API or MYOLO_KAFKA_BOOTSTRAP points it elsewhere)."""
    monkeypatch.setenv("MYOLO_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("MYOLO_API", raising=False)
    monkeypatch.delenv("MYOLO_KAFKA_BOOTSTRAP", raising=False)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))
