"""The topic catalogue and the type registry agree: every registered type has one topic, and no topic lists a
type that is not registered (the catalogue refers to the names defined once in events/types.py)."""

from __future__ import annotations

from collections import Counter

from myolo.events.topics import CATALOGUE, topic_for_type
from myolo.events.types import PAYLOAD_TYPES


def test_every_type_has_exactly_one_topic_and_every_listed_type_is_registered() -> None:
    listed = Counter(t for topic in CATALOGUE for t in topic.types)
    assert set(listed) == set(PAYLOAD_TYPES)
    assert all(n == 1 for n in listed.values()), listed
    assert topic_for_type("ai.myolo.command.v1") == "myolo.commands"
