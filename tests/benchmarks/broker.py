"""A private broker for a benchmark run (the same local Kafka the tests use)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from myolo.coordinator.localstack.broker import LocalBroker


@contextmanager
def benchmark_broker() -> Iterator[LocalBroker]:
    state_dir = Path(tempfile.mkdtemp(prefix="myolo-bench-kafka-"))
    broker = LocalBroker(state_dir, tied_to_parent=True)
    broker.start()
    try:
        yield broker
    finally:
        broker.clean()
        shutil.rmtree(state_dir, ignore_errors=True)
