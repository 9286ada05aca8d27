"""What one record may carry: every bound of the event contract, in one place.

Every input is hostile, so each part of a record has a size, and a record over any of them is dead-lettered
with a reason that names the limit (``id is 900000 bytes; the limit is 256``). The figures leave ample room
for what our producers and sane external ones send (ids are 32 hex digits, type names ~30 characters,
payloads nest at most 5 levels) and keep what one record can cost a consumer small and predictable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only an annotation: the trainer's torch-free job check imports this module, not asyncio
    from myolo.common.clock import Clock

MAX_RECORD_BYTES = 1 << 20
"""The record's value (the JSON payload, or the whole structured CloudEvent)."""

MAX_DEPTH = 32
"""Levels of JSON arrays and objects in a payload, the payload object itself being the first."""

MAX_KEY_BYTES = 256
"""The Kafka key: the entity an event is about (node, job, model, component), an id like the others."""

ATTRIBUTE_BYTES: dict[str, int] = {
    "specversion": 8,
    "id": 256,
    "source": 512,
    "type": 256,
    "subject": 512,
    "time": 64,
    "datacontenttype": 256,
}
"""CloudEvents context attributes, in UTF-8 bytes."""

MAX_HEADER_BYTES = 4096
"""An extension attribute's value (a W3C ``tracestate`` is at most 512)."""

MAX_HEADERS = 64
"""Kafka headers of one record, ours and those other tools add (only those we read are decoded)."""

MAX_EXTENSIONS = 16
"""CloudEvents extension attributes of one event (we use four: traceparent, tracestate, sigkeyid, sig)."""

EXTENSION_NAME = re.compile(r"^[a-z0-9]{1,20}$")
"""CloudEvents: extension names are lowercase letters and digits, at most 20 of them."""

MAX_REASON_BYTES = 1024
"""A dead letter's reason and field headers; longer ones are cut (they may quote the hostile input)."""

DEDUPE_WINDOW_IDS = 100_000
DEDUPE_WINDOW_BYTES = 24 << 20
"""The consumer's memory of recent event ids: whichever bound is reached first forgets the oldest."""


def over(what: str, size: int, limit: int, unit: str = "bytes") -> str:
    """The reason for a value over its limit, in the words every such reason uses."""
    return f"{what} is {size} {unit}; the limit is {limit}"


def cut(text: str, limit: int = MAX_REASON_BYTES) -> str:
    """``text`` within ``limit`` UTF-8 bytes, marked when cut (reasons and log lines may quote hostile input)."""
    if len(text) * 4 <= limit or len(text.encode(errors="replace")) <= limit:
        return text
    return text.encode(errors="replace")[: limit - 20].decode(errors="ignore") + " ... (cut)"


@dataclass
class Throttle:
    """At most ``burst`` log lines per ``window_s`` of the clock, so a flood of hostile input cannot flood the
    log; the rest are counted and reported with the next line let through."""

    clock: Clock
    window_s: float = 10.0
    burst: int = 10
    _window_start: float = float("-inf")
    _in_window: int = 0
    suppressed: int = 0

    def allow(self) -> int | None:
        """None: stay quiet. Otherwise log now, adding the returned count of lines left out since the last."""
        now = self.clock.monotonic()
        if now - self._window_start >= self.window_s:
            self._window_start, self._in_window = now, 0
        if self._in_window >= self.burst:
            self.suppressed += 1
            return None
        self._in_window += 1
        left_out, self.suppressed = self.suppressed, 0
        return left_out

    def warn(self, logger: Any, event: str, **fields: Any) -> None:
        """``logger.warning(event, **fields)`` within the budget, saying how many lines it held back before."""
        held_back = self.allow()
        if held_back is not None:
            logger.warning(event, **fields, not_logged_before=held_back)
