"""A tailed record as the document ``myoloctl events tail`` prints: the event's fields where it decodes, the
reason where it does not, and the dead-letter headers. Built by hand: no broker."""

from __future__ import annotations

from aiokafka import ConsumerRecord

from myolo.events.bus.tail import TopicMissing, record_doc
from myolo.events.codec import encode
from myolo.events.envelope import new_event
from myolo.events.examples import node_sample

TOPIC = "myolo.node.samples"


def test_an_event_is_its_place_and_its_fields() -> None:
    event = new_event(node_sample("node-7"), "test")
    key, value, headers = encode(event)
    doc = record_doc(ConsumerRecord(TOPIC, 2, 41, 0, 0, key, value, None, len(key or b""), len(value), headers))
    assert (doc["topic"], doc["partition"], doc["offset"]) == (TOPIC, 2, 41)
    assert (doc["id"], doc["type"], doc["key"]) == (event.id, event.type, event.key)
    assert "invalid" not in doc and "dead_letter" not in doc


def test_a_record_that_is_no_event_says_why() -> None:
    doc = record_doc(ConsumerRecord(TOPIC, 0, 3, 0, 0, b"theirs", b"not json", None, 6, 8, []))
    assert doc["key"] == "theirs" and doc["invalid"] and "type" not in doc


def test_a_missing_topic_is_named() -> None:
    assert str(TopicMissing("nope")) == "topic 'nope' does not exist"
