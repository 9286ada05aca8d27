"""The two things we need from aiokafka that it does not offer publicly, kept here and nowhere else.

- The consumer group generation a member joined: the epoch of a term is at least that generation.
- Metadata of topics for a consumer that uses ``assign`` (no group): it knows no partitions until asked.

``tests/integration/coordinator/test_aiokafka_internals.py`` checks both against a real broker, so an aiokafka
upgrade that moves them fails that test loudly instead of silently giving generation -1.
"""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer


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
