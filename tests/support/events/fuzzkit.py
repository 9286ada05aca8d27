"""Hostile records for the consumer's property tests: generators, and a rig that feeds them and keeps count.

Records are built as aiokafka hands them over (``ConsumerRecord`` with bytes or None for key and value, a list
of ``(str, bytes | None)`` headers). They come three ways: arbitrary bytes and headers; valid events of every
registered type with their JSON tree mutated (deep nesting, huge or out-of-range numbers, wrong types, huge
strings, unknown fields), in binary and structured mode; and valid records with their bytes or headers
damaged (bit flips, truncation, splices, dropped or duplicated headers, non-UTF-8 or huge values, many
extensions, bad names). Each generator takes a seeded PRNG, so one drawn seed reproduces a record.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any

import msgspec
from aiokafka import ConsumerRecord

from myolo.common.clock import SimClock
from myolo.common.keys import HmacKey
from myolo.events.bus import EventConsumer
from myolo.events.codec import encode, encode_structured
from myolo.events.envelope import Event, new_event
from myolo.events.examples import example_payloads
from myolo.events.limits import MAX_REASON_BYTES
from myolo.events.settings import KafkaSettings
from myolo.events.signing import Verifier, sign
from myolo.events.topics import COMMANDS, topic_for_type
from myolo.events.types import PAYLOAD_TYPES

NODE = "gpu-node-001"
KEY = HmacKey("fuzz", b"k" * 32)
TYPES = sorted(PAYLOAD_TYPES)
INGEST_TOPICS = sorted({topic_for_type(t) for t in TYPES} - {COMMANDS})
ALL_TOPICS = [*INGEST_TOPICS, COMMANDS]
MODES = ["ok", "ok", "ok", "error", "recursion", "base", "flaky"]
EXAMPLES = example_payloads(NODE)
PLACES: dict[tuple[str, bool], list[tuple]] = {}  # every place in each type's JSON tree, binary and structured
RAW = "__fuzz_raw__"  # a string in the JSON tree that is replaced by raw JSON text after encoding
HEADER_NAMES = [
    "ce_specversion",
    "ce_id",
    "ce_source",
    "ce_type",
    "ce_time",
    "ce_subject",
    "content-type",
    "traceparent",
    "tracestate",
    "ce_sig",
    "ce_sigkeyid",
    "ce_datacontenttype",
    "ce_partitionkey",
    "CE_ID",
    "ce_",
    "x-other",
]
HEADER_VALUES = [
    b"1.0",
    b"0.3",
    b"",
    b"application/json",
    b"application/cloudevents+json",
    b"text/plain",
    b"\xff\xfe",
    b"2026-01-01T00:00:00Z",
    b"yesterday",
    b"fuzz",
    NODE.encode(),
    *(t.encode() for t in TYPES),
]
SIZES = [0, 1, 8, 64, 255, 256, 257, 513, 4097, 70_000, 1_100_000]
NUMBERS = ["1e999", "-1e999", "1" + "0" * 400, "-0", "1e-400", "NaN", "Infinity", "-1", "1.5", "18446744073709551616"]


class InstantClock(SimClock):
    """Backoff sleeps pass at once."""

    async def sleep(self, seconds: float) -> None:
        self._t += seconds


class Boom(BaseException):
    """Not an Exception, not cancellation: a handler raising it must be dead-lettered, not escape."""


class DeadLetters:
    """Records what would be sent, and checks it is sendable (types and bounded headers)."""

    def __init__(self) -> None:
        self.sent = 0

    async def send_raw(self, topic: str, value: Any, key: Any, headers: Any) -> None:
        assert value is not None or key is not None, "Kafka clients refuse a record with neither key nor value"
        assert value is None or isinstance(value, bytes)
        assert key is None or isinstance(key, bytes)
        ours = {}
        for name, v in headers:
            assert isinstance(name, str) and (v is None or isinstance(v, bytes)), (name, v)
            if name.startswith("myolo-dlq-"):
                assert len(v) <= MAX_REASON_BYTES, (name, len(v))
                ours[name] = v
        assert ours["myolo-dlq-reason"] and "myolo-dlq-field" in ours, ours
        self.sent += 1


@dataclass
class Rig:
    """The coordinator's ingest consumer and an agent's command consumer, fed one record at a time."""

    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    dlq: DeadLetters = field(default_factory=DeadLetters)
    mode: str = "ok"
    delivered: int = 0
    inputs: int = 0

    def __post_init__(self) -> None:
        settings = KafkaSettings(bootstrap="127.0.0.1:1")
        self.ingest = EventConsumer(
            settings, INGEST_TOPICS, "fuzz-ingest", self.handle, dead_letters=self.dlq, clock=InstantClock()
        )
        self.agent = EventConsumer(
            settings,
            [COMMANDS],
            "fuzz-agent",
            self.handle,
            dead_letters=self.dlq,
            clock=InstantClock(),
            verifier=Verifier([KEY]),
            accept_key=lambda key: key is None or key == NODE.encode(),
        )

    async def handle(self, event: Any, info: Any) -> None:
        if self.mode == "error":
            raise ValueError("handler cannot place this")
        if self.mode == "recursion":
            raise RecursionError("maximum recursion depth exceeded")
        if self.mode == "base":
            raise Boom("not an Exception")
        if self.mode == "flaky":
            self.mode = "ok"
            raise ConnectionError("store briefly away")
        self.delivered += 1

    def feed(self, record: ConsumerRecord, mode: str = "ok") -> None:
        """Process one record; every record ends exactly one way, and nothing escapes."""
        consumer = self.agent if record.topic == COMMANDS else self.ingest
        stats = consumer.stats
        consumed, outcomes, handled, dead = stats.consumed, _outcomes_of(stats), stats.handled, stats.dead_lettered
        delivered, sent = self.delivered, self.dlq.sent
        self.mode = mode
        self.inputs += 1
        self.loop.run_until_complete(consumer.process(record))
        assert stats.consumed == consumed + 1
        assert _outcomes_of(stats) == outcomes + 1, stats
        assert self.delivered - delivered == stats.handled - handled, "handled means delivered to the handler"
        assert self.dlq.sent - sent == stats.dead_lettered - dead, "dead-lettered means sent to the topic"

    def totals(self) -> tuple[int, int]:
        """(records in, records accounted for) over both consumers."""
        stats = [self.ingest.stats, self.agent.stats]
        return sum(s.consumed for s in stats), sum(_outcomes_of(s) for s in stats)

    def close(self) -> None:
        self.loop.close()


def _outcomes_of(stats: Any) -> int:
    return stats.handled + stats.dead_lettered + stats.duplicates + stats.skipped


def record(topic: str, value: bytes | None, key: bytes | None, headers: list, offset: int = 0) -> ConsumerRecord:
    return ConsumerRecord(topic, 0, offset, 0, 0, key, value, None, 0, 0, headers)


# ---- generators: hypothesis draws the seed, a PRNG makes the bytes (a byte-by-byte draw costs far more) ----


def one_of(rng: random.Random, *choices: Any) -> Any:
    return choices[rng.randrange(len(choices))]


def some_bytes(rng: random.Random) -> bytes:
    n = one_of(rng, 0, 1, rng.randrange(64), rng.randrange(4096), one_of(rng, *SIZES))
    return rng.randbytes(n) if n <= 4096 else rng.randbytes(64) * (n // 64)


def some_key(rng: random.Random) -> bytes | None:
    return one_of(rng, None, NODE.encode(), rng.randbytes(rng.randrange(300)), b"k" * one_of(rng, *SIZES))


def header_value(rng: random.Random) -> bytes | None:
    size = one_of(rng, *SIZES) if rng.random() < 0.02 else one_of(rng, *SIZES[:-2])
    return one_of(rng, None, one_of(rng, *HEADER_VALUES), rng.randbytes(rng.randrange(80)), b"i" * size)


def header_name(rng: random.Random) -> str:
    text = rng.randbytes(rng.randrange(30)).decode("latin-1")
    return one_of(rng, one_of(rng, *HEADER_NAMES), text, "ce_" + text.lower(), "ce_x" * rng.randrange(100))


def arbitrary(rng: random.Random) -> tuple[ConsumerRecord, str]:
    """Any bytes, any key, any headers, on any topic."""
    value = None if rng.random() < 0.05 else some_bytes(rng)
    headers = [(header_name(rng), header_value(rng)) for _ in range(rng.randrange(one_of(rng, 4, 12, 80)))]
    return record(one_of(rng, *ALL_TOPICS), value, some_key(rng), headers), one_of(rng, *MODES)


def nested(depth: int, kind: str) -> str:
    return "[" * depth + "]" * depth if kind == "array" else '{"a":' * depth + "1" + "}" * depth


def hostile_json(rng: random.Random) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        depth = one_of(rng, rng.randrange(1, 40), rng.randrange(40, 5000))
        return nested(depth, one_of(rng, "array", "object"))
    if kind == 1:
        return one_of(rng, *NUMBERS)
    if kind == 2:
        return one_of(rng, "null", "true", '"text"', "123", "-5", "[]", "{}", '{"x": [1, {"y": null}]}', "1.0e308")
    return msgspec.json.encode(one_of(rng, "x", "\u00e9", "[", '"') * one_of(rng, *SIZES)).decode()


def example_event(rng: random.Random) -> tuple[str, Event]:
    type_ = one_of(rng, *TYPES)
    event = new_event(EXAMPLES[type_], "fuzz/src", event_id=one_of(rng, "dup-1", "dup-2", None))
    return type_, sign(event, KEY) if type_ == "ai.myolo.command.v1" else event


def hostile_event(rng: random.Random) -> tuple[ConsumerRecord, str]:
    """A valid event of any type, binary or structured, with values of its JSON tree made hostile."""
    type_, event = example_event(rng)
    structured = rng.random() < 0.5
    tree = msgspec.json.decode(encode_structured(event) if structured else encode(event)[1])
    places = PLACES.get((type_, structured)) or PLACES.setdefault((type_, structured), paths(tree))
    raws = []
    for _ in range(rng.randrange(4)):  # none: the valid event itself, to be delivered (or a duplicate)
        # the root is an object: a new field there is an unknown field (or an extension); a place under one
        # replaced before is gone, and goes to the root too
        if rng.random() > 0.7 or not put(tree, one_of(rng, *places), RAW):
            put(tree, ("fuzzextra",), RAW)
        raws.append(hostile_json(rng))
    value = msgspec.json.encode(tree)
    for raw in raws:
        value = value.replace(f'"{RAW}"'.encode(), raw.encode(), 1)
    key, _, headers = encode(event)
    if structured:
        headers = one_of(rng, [], [("content-type", b"application/cloudevents+json")])
    topic = topic_for_type(type_) if rng.random() < 0.8 else one_of(rng, *ALL_TOPICS)
    return record(topic, value, key, headers), one_of(rng, *MODES)


def damaged_record(rng: random.Random) -> tuple[ConsumerRecord, str]:
    """A valid record of any type with its bytes or headers damaged."""
    type_, event = example_event(rng)
    if rng.random() < 0.5:
        key, value, headers = encode(event)
    else:
        key, value, headers = event.key.encode() if event.key else None, encode_structured(event), []
    data, hdrs = bytearray(value), list(headers)
    for _ in range(rng.randrange(1, 5)):
        how = rng.randrange(9)
        if how == 0 and data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif how == 1:
            del data[rng.randrange(len(data) + 1) :]
        elif how == 2:
            i = rng.randrange(len(data) + 1)
            data[i:i] = one_of(rng, rng.randbytes(rng.randrange(64)), b"[" * 3000, b"{", b'"', b"\\", value)
        elif how == 3 and hdrs:
            hdrs.pop(rng.randrange(len(hdrs)))
        elif how == 4 and hdrs:
            hdrs.append(one_of(rng, *hdrs))
        elif how == 5 and hdrs:
            i = rng.randrange(len(hdrs))
            hdrs[i] = (hdrs[i][0], header_value(rng))
        elif how == 6:
            hdrs += [(f"ce_x{i}", b"v") for i in range(rng.randrange(1, 80))]
        elif how == 7:
            hdrs.append(
                (one_of(rng, "ce_Upper", "ce_under_score", "ce_" + "n" * 300, "ce_\u00e9", header_name(rng)), b"v")
            )
        elif how == 8:
            hdrs.append((one_of(rng, *HEADER_NAMES), b"i" * one_of(rng, *SIZES)))
    topic = topic_for_type(type_) if rng.random() < 0.8 else one_of(rng, *ALL_TOPICS)
    return record(topic, bytes(data), key, hdrs), one_of(rng, *MODES)


def paths(tree: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a JSON tree (the root's children and below)."""
    out = []
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else ()
    for k, v in items:
        out.append((*prefix, k))
        out += paths(v, (*prefix, k))
    return out


def put(tree: Any, path: tuple, value: Any) -> bool:
    """Set the value at ``path``; False when the path is no longer there."""
    try:
        for k in path[:-1]:
            tree = tree[k]
        tree[path[-1]] = value
    except (KeyError, IndexError, TypeError):
        return False
    return True


GENERATORS = {"arbitrary": arbitrary, "events": hostile_event, "records": damaged_record}
