"""What we need from aiokafka that it does not offer publicly, kept here and nowhere else.

- The consumer group generation a member joined: the epoch of a term is at least that generation.
- Metadata of topics for a consumer that uses ``assign`` (no group): it knows no partitions until asked.
- A pace on metadata updates. The producer's sender asks for one whenever a partition has no known leader and
  waits for it; while the broker refuses connections the update fails at once, so sender and update loop with
  no back-off (thousands of connection attempts a second for as long as it lasts; the fetcher has the same
  shape, aiokafka issue 1155). Each update now starts at least the client's ``retry_backoff_ms`` after the
  previous one, as the Java client's metadata back-off does.

``tests/integration/coordinator/test_aiokafka_internals.py`` checks them against a real broker, so an aiokafka
upgrade that moves them fails that test loudly instead of silently giving generation -1.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer


class AiokafkaChanged(RuntimeError):
    """aiokafka no longer has what this module reads: pin the version or adapt this module."""


def group_generation(consumer: AIOKafkaConsumer) -> int:
    """The generation of the group this (started, subscribed) consumer last joined; -1 before it joined."""
    coordinator = getattr(consumer, "_coordinator", None)
    if coordinator is None:
        return -1  # not started, or started without a group
    generation = getattr(coordinator, "generation", None)
    if not isinstance(generation, int):
        raise AiokafkaChanged("AIOKafkaConsumer._coordinator.generation is gone or not an int")
    return generation


async def load_metadata(consumer: AIOKafkaConsumer, topics: list[str]) -> None:
    """Make a started consumer fetch metadata of ``topics`` so ``partitions_for_topic`` answers for them."""
    client = getattr(consumer, "_client", None)
    set_topics = getattr(client, "set_topics", None)
    if set_topics is None:
        raise AiokafkaChanged("AIOKafkaConsumer._client.set_topics is gone")
    await set_topics(topics)


def pace_metadata_updates(
    owner: AIOKafkaProducer | AIOKafkaConsumer,
    *,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> None:
    """Make the client of a (not yet started) producer or consumer start each metadata update at least its
    ``retry_backoff_ms`` after the previous one began."""
    client = getattr(owner, "client", None) or getattr(owner, "_client", None)
    update = getattr(client, "_metadata_update", None)
    backoff = getattr(client, "_retry_backoff", None)
    if not callable(update) or not isinstance(backoff, int | float):
        raise AiokafkaChanged("AIOKafkaClient._metadata_update or _retry_backoff is gone")
    last = float("-inf")

    async def paced(cluster: Any, topics: Any) -> bool:
        nonlocal last
        wait = last + backoff - monotonic()
        if wait > 0:
            await sleep(wait)
        last = monotonic()
        return await update(cluster, topics)

    client._metadata_update = paced  # type: ignore[union-attr]
