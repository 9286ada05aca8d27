"""Property: no record, however malformed, escapes the consumer's processing path, and each is accounted for.

Every input is delivered to the handler, dead-lettered (with a reason and a field), dropped as a duplicate
or skipped as another node's, exactly one of them (``EventConsumer.process`` with a recording dead-letter
sink: the Kafka client is not under test here). The handler itself fails in every way a handler can,
``BaseException`` subclasses included.

``make test`` runs a fixed, derandomized set of examples (seconds). ``make fuzz`` sets MYOLO_FUZZ_EXAMPLES
(the inputs over all tests of this module) and runs them in random chunks, each with its own seed, so a long
run neither repeats itself nor grows hypothesis's memory of examples without bound.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tests.support.events.fuzzkit import GENERATORS, Rig

FUZZ_EXAMPLES = int(os.environ.get("MYOLO_FUZZ_EXAMPLES", "0"))
CI_INPUTS = 384
BATCH = 32  # records per drawn seed: hypothesis's own cost per example is far above a record's
CHUNK = 2_000  # examples per hypothesis run in a long one
SHARES = {"arbitrary": 0.2, "events": 0.4, "records": 0.4}
seeds = st.integers(0, 2**64 - 1)


def run_property(rig: Rig, kind: str) -> None:
    """Feed ``kind`` records: a fixed, derandomized set in CI; random chunks, each with its seed, in a long run."""
    generate = GENERATORS[kind]

    def check(seed_: int) -> None:
        rng = random.Random(seed_)
        for _ in range(BATCH):
            rig.feed(*generate(rng))

    quiet = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]
    if not FUZZ_EXAMPLES:
        ci = settings(max_examples=CI_INPUTS // BATCH, derandomize=True, deadline=None, database=None)
        ci(given(seeds)(check))()
        return
    rng = random.Random()
    n = round(FUZZ_EXAMPLES * SHARES[kind] / BATCH)
    for start in range(0, n, CHUNK):
        chunk = settings(max_examples=min(CHUNK, n - start), deadline=None, database=None, suppress_health_check=quiet)
        seed(rng.getrandbits(64))(chunk(given(seeds)(check)))()


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))  # 1M log lines
    r = Rig()
    t0 = time.monotonic()
    try:
        yield r
    finally:
        structlog.configure(**saved)
    consumed, accounted = r.totals()
    print(
        f"\nfuzz: {r.inputs} inputs in {time.monotonic() - t0:.0f} s; {r.dlq.sent} dead-lettered, "
        f"{r.delivered} delivered, {consumed - r.dlq.sent - r.delivered} duplicates or skipped"
    )
    assert consumed == accounted == r.inputs
    r.close()


def test_arbitrary_bytes_and_headers(rig: Rig) -> None:
    run_property(rig, "arbitrary")


def test_valid_events_of_every_type_with_hostile_values(rig: Rig) -> None:
    run_property(rig, "events")


def test_valid_records_with_damaged_bytes_and_headers(rig: Rig) -> None:
    run_property(rig, "records")
