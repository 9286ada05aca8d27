"""The CloudEvents 1.0 envelope as one in-memory value, independent of how it travels on Kafka."""

from __future__ import annotations

import os
import time
from datetime import datetime

import msgspec

from myolo.common.clock import Clock, SystemClock
from myolo.events.payloads import Payload
from myolo.events.types import partition_key, type_name

SPECVERSION = "1.0"
_SYSTEM_CLOCK = SystemClock()


class Event(msgspec.Struct, kw_only=True):
    """A CloudEvent with a typed payload.

    ``key`` is the Kafka partition key (the entity the event is about). ``extensions`` holds CloudEvents
    extension attributes we use: ``traceparent``/``tracestate`` (W3C trace context), ``sigkeyid``/``sig``
    (command signatures). ``raw_data`` is the payload's bytes exactly as received, which signatures cover.
    """

    id: str
    source: str
    type: str
    time: str | None
    data: Payload
    key: str | None = None
    subject: str | None = None
    extensions: dict[str, str] = {}
    raw_data: bytes | None = None


_second_cache: tuple[int, str] = (-1, "")


def rfc3339(ts: float) -> str:
    """Seconds since the epoch as an RFC 3339 UTC timestamp with microseconds.

    Every event gets one, so the formatted second is cached and only the microseconds are added."""
    global _second_cache
    sec = int(ts // 1)
    if _second_cache[0] != sec:
        _second_cache = (sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)))
    return f"{_second_cache[1]}.{int((ts - sec) * 1_000_000):06d}Z"


_ID_BYTES, _POOL_IDS = 16, 256
_pool: list[str] = []  # random ids not handed out yet, from one read of the OS's CSPRNG


def new_id() -> str:
    """A random 128-bit event id in hex (as unique as a UUID4, cheaper to make).

    Ids stay unpredictable (an id another producer could guess is one it could burn in a consumer's
    duplicate window), so they come from ``os.urandom``, read for 256 ids at a time; the pool is dropped
    in a forked child, which must never repeat its parent's ids."""
    if not _pool:
        block = os.urandom(_ID_BYTES * _POOL_IDS).hex()
        step = 2 * _ID_BYTES
        _pool.extend(block[i : i + step] for i in range(0, len(block), step))
    return _pool.pop()


os.register_at_fork(after_in_child=_pool.clear)


def parse_rfc3339(value: str) -> datetime:
    """Parse an RFC 3339 timestamp; ``ValueError`` when it is not one (a timezone is required)."""
    dt = datetime.fromisoformat(value)
    if dt.tzinfo is None:
        raise ValueError("timestamp has no timezone offset")
    return dt


def event_seconds(event: Event, default: float) -> float:
    """The event's own time in seconds since the epoch (its producer's clock); ``default`` when it has none
    or one that does not parse."""
    if event.time is None:
        return default
    try:
        return parse_rfc3339(event.time).timestamp()
    except ValueError:
        return default


def new_event(
    data: Payload,
    source: str,
    *,
    clock: Clock | None = None,
    subject: str | None = None,
    key: str | None = None,
    event_id: str | None = None,
) -> Event:
    """Wrap a payload in an envelope: type and key come from the payload, time from the clock."""
    return Event(
        id=event_id or new_id(),
        source=source,
        type=type_name(data),
        time=rfc3339((clock or _SYSTEM_CLOCK).now()),
        data=data,
        key=key if key is not None else partition_key(data),
        subject=subject,
    )
