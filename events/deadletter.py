"""Dead-lettering: a record no consumer can accept is kept, untouched, with why and where it came from.

The original value, key and headers are copied as they were; ``myolo-dlq-*`` headers add the reason, the
field at fault, the source topic/partition/offset and the consumer group. A person reads the reason with
``myoloctl events tail myolo.deadletter``; a tool can replay the original bytes.

Building a dead letter never fails, whatever the record holds: a header that is not ``(str, bytes)`` is
written as text, and our own headers are cut to :data:`myolo.events.limits.MAX_REASON_BYTES` (a reason may quote
the hostile input). When the broker refuses the letter itself as too large, :func:`without_original` keeps
everything but the original value and headers, and says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import msgspec
from opentelemetry import metrics

from myolo.events.errors import InvalidEvent
from myolo.events.limits import cut

_meter = metrics.get_meter("myolo.events")
DEAD_LETTERED = _meter.create_counter(
    "myolo.events.dead_lettered", unit="{record}", description="records sent to the dead-letter topic"
)
DLQ_PREFIX = "myolo-dlq-"
# metric attributes must stay few whatever the input says, so the field is reduced to one of these
_FIELD_KINDS = frozenset(
    [
        "value",
        "data",
        "key",
        "headers",
        "header",
        "type",
        "handler",
        "specversion",
        "id",
        "source",
        "time",
        "subject",
        "datacontenttype",
        "data_base64",
        "partitionkey",
        "extensions",
    ]
)

RawHeaders = list[tuple[str, bytes | None]]


class DeadLetterSink(Protocol):
    """Where dead letters go: :class:`myolo.events.bus.EventProducer` (tests may pass a recorder)."""

    async def send_raw(self, topic: str, value: bytes | None, key: bytes | None, headers: RawHeaders) -> object: ...


class RecordInfo(msgspec.Struct, frozen=True):
    """Where a record came from (made for every record consumed: a Struct, which is cheap to build)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None = None
    key: bytes | None = None


@dataclass(frozen=True)
class DeadLetter:
    """One record for the dead-letter topic, ready to send."""

    value: bytes | None
    key: bytes | None
    headers: RawHeaders


def dead_letter(
    value: object, key: object, headers: object, info: RecordInfo, error: InvalidEvent, group: str, when: str
) -> DeadLetter:
    """The original record plus our headers describing the rejection; never raises."""
    return _sendable(DeadLetter(_bytes(value), _bytes(key), dead_letter_headers(headers, info, error, group, when)))


def without_original(letter: DeadLetter, why: str) -> DeadLetter:
    """The same letter without the original value and headers (kept: the key and our headers), saying why."""
    ours = [(k, v) for k, v in letter.headers if k.startswith(DLQ_PREFIX) and k != DLQ_PREFIX + "value"]
    size = len(letter.value or b"")
    note = f"original value ({size} bytes) and headers not kept: {why}"
    return _sendable(DeadLetter(None, letter.key, [*ours, (DLQ_PREFIX + "dropped", _cut(note))]))


def _sendable(letter: DeadLetter) -> DeadLetter:
    """Kafka clients refuse a record with neither key nor value: such a letter gets an empty value, and a
    header saying the original had none."""
    if letter.key is not None or letter.value is not None:
        return letter
    return DeadLetter(b"", None, [*letter.headers, (DLQ_PREFIX + "value", b"none")])


def dead_letter_headers(headers: object, info: RecordInfo, error: InvalidEvent, group: str, when: str) -> RawHeaders:
    """The original headers (made safe to send) plus ours describing the rejection."""
    ours = [
        ("reason", error.reason),
        ("field", error.field or ""),
        ("error", str(error)),
        ("topic", info.topic),
        ("partition", str(info.partition)),
        ("offset", str(info.offset)),
        ("group", group),
        ("time", when),
    ]
    return [*_safe_headers(headers), *((DLQ_PREFIX + k, _cut(str(v))) for k, v in ours)]


def dead_letter_info(headers: Iterable[tuple[str, bytes | None]]) -> dict[str, str]:
    """Read our ``myolo-dlq-*`` headers back (for tests, ``events tail`` and replay tools)."""
    return {k[len(DLQ_PREFIX) :]: (v or b"").decode(errors="replace") for k, v in headers if k.startswith(DLQ_PREFIX)}


def field_kind(field: str | None) -> str:
    """The first word of a field (``data.gpus[0].index`` -> ``data``), from a fixed set: a metric attribute."""
    head = (field or "-").replace("[", ".").replace(" ", ".").split(".", 1)[0]
    return head if head in _FIELD_KINDS else "other"


def count(error: InvalidEvent, topic: str) -> None:
    DEAD_LETTERED.add(1, {"messaging.destination.name": topic, "error.field": field_kind(error.field)})


def _cut(text: str) -> bytes:
    return cut(text).encode(errors="replace")


def _safe_headers(headers: object) -> RawHeaders:
    """Kafka headers as ``(str, bytes | None)`` pairs whatever ``headers`` holds."""
    if not headers:
        return []
    try:
        items = list(headers)  # type: ignore[call-overload]
    except Exception:
        return [(DLQ_PREFIX + "headers", _cut(f"unreadable: {type(headers).__name__}"))]
    out: RawHeaders = []
    for item in items:
        if isinstance(item, tuple) and len(item) == 2:
            name, value = item
            text = name if isinstance(name, str) else _text(name)
            out.append((text.encode(errors="replace").decode(), _bytes(value)))  # a lone surrogate cannot be sent
        else:
            out.append((DLQ_PREFIX + "header", _cut(f"not a (name, value) pair: {_text(item)}")))
    return out


def _bytes(value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return _text(value).encode(errors="replace")


def _text(value: object) -> str:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode(errors="replace")
    try:
        return value if isinstance(value, str) else repr(value)
    except Exception:
        return f"<unprintable {type(value).__name__}>"
