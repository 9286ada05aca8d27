"""Dead-lettering: a record no consumer can accept is kept, untouched, with why and where it came from.

The original value, key and headers are copied as they were; ``myolo-dlq-*`` headers add the reason, the
field at fault, the source topic/partition/offset and the consumer group. A person reads the reason with
``myoloctl events tail myolo.deadletter``; a tool can replay the original bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry import metrics

from events.errors import InvalidEvent

_meter = metrics.get_meter("myolo.events")
DEAD_LETTERED = _meter.create_counter(
    "myolo.events.dead_lettered", unit="{record}", description="records sent to the dead-letter topic"
)
DLQ_PREFIX = "myolo-dlq-"


@dataclass(frozen=True)
class RecordInfo:
    """Where a record came from."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None = None
    key: bytes | None = None


def dead_letter_headers(
    headers: Sequence[tuple[str, bytes]], info: RecordInfo, error: InvalidEvent, group: str, when: str
) -> list[tuple[str, bytes]]:
    """The original headers plus ours describing the rejection."""
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
    return [*(headers or ()), *((DLQ_PREFIX + k, v.encode()) for k, v in ours)]


def dead_letter_info(headers: Sequence[tuple[str, bytes]]) -> dict[str, str]:
    """Read our ``myolo-dlq-*`` headers back (for tests, ``events tail`` and replay tools)."""
    return {k[len(DLQ_PREFIX) :]: v.decode(errors="replace") for k, v in headers if k.startswith(DLQ_PREFIX)}


def count(error: InvalidEvent, topic: str) -> None:
    DEAD_LETTERED.add(1, {"messaging.destination.name": topic, "error.field": (error.field or "-").split(".")[0]})
