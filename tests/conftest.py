"""Shared fixtures. `kafka`: ONE real Apache Kafka broker for the whole pytest session.

The broker lives in a private temporary state dir (never the user's `myoloctl local up` stack), dies
with the pytest process if pytest is killed (PR_SET_PDEATHSIG), and is stopped and deleted at the end.
Jars come from the shared cache (~/.cache/myolo or MYOLO_CACHE_DIR), fetched on the first run only.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.core.coordinator import topic_specs
from myolo.coordinator.localstack.broker import BrokerError, LocalBroker
from myolo.events.settings import KafkaSettings
from myolo.events.topics import ensure_topics


@pytest.fixture(scope="session", autouse=True)
def _private_autotune_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Tests (and the workers they spawn) tune attention into a cache of their own, not the user's."""
    os.environ["MYOLO_AUTOTUNE_CACHE"] = str(tmp_path_factory.mktemp("autotune") / "attention_autotune.json")
    yield
    os.environ.pop("MYOLO_AUTOTUNE_CACHE", None)


@pytest.fixture(scope="session")
def kafka() -> Iterator[LocalBroker]:
    """A running broker: `.bootstrap` is "127.0.0.1:PORT"; `.stop()`/`.start()` restart it in place
    (same ports, same data), for tests of clients across a broker restart."""
    state_dir = Path(tempfile.mkdtemp(prefix="myolo-test-kafka-"))
    broker = LocalBroker(state_dir, tied_to_parent=True)
    try:
        broker.start()
    except BrokerError as err:
        shutil.rmtree(state_dir, ignore_errors=True)
        pytest.fail(f"cannot start the test broker: {err.render()}", pytrace=False)
    try:
        yield broker
    finally:
        broker.clean()
        shutil.rmtree(state_dir, ignore_errors=True)


_topics_ready: set[str] = set()


@pytest.fixture
async def settings(kafka: LocalBroker) -> KafkaSettings:
    """Client settings for the session broker, with every topic created (once per broker): the events'
    catalogue and the state topics of the coordinator's components."""
    s = KafkaSettings(bootstrap=kafka.bootstrap, client_id="myolo-test")
    if kafka.bootstrap not in _topics_ready:
        await ensure_topics(s.client_kwargs(), topic_specs(COMPONENTS))
        _topics_ready.add(kafka.bootstrap)
    return s
