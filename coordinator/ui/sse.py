"""The dashboard's live feed: server-sent events telling each browser which components changed.

The core reports every component that handled an event or took a state record (``Boards``); each browser's
``Stream`` keeps the set of components changed since its last message (bounded by their number, however fast
events come) and is written at most once per ``coalesce_s``. The browser then reloads the pages of those
components it shows: the feed carries names, never data, so a slow browser costs a set, not a queue.
"""

from __future__ import annotations

import asyncio

import msgspec

KEEPALIVE = b": keepalive\n\n"


def frame(event: str, data: msgspec.Struct | dict | list) -> bytes:
    """One server-sent event: ``event: NAME`` and one ``data:`` line of compact JSON, then a blank line."""
    if not event.isidentifier():
        raise ValueError(f"not an event name: {event!r}")
    body = msgspec.json.encode(data)  # JSON escapes every newline inside strings: one line
    return b"event: " + event.encode() + b"\ndata: " + body + b"\n\n"


class Changed(msgspec.Struct, kw_only=True, frozen=True):
    components: list[str]


class Stream:
    """One browser's pending changes."""

    def __init__(self) -> None:
        self.dirty: set[str] = set()
        self.wake = asyncio.Event()

    def mark(self, component: str) -> None:
        self.dirty.add(component)
        self.wake.set()

    def take(self) -> Changed:
        out = Changed(components=sorted(self.dirty))
        self.dirty.clear()
        self.wake.clear()
        return out


class Feed:
    """Every browser following the feed, at most ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.streams: set[Stream] = set()
        self.refused = 0

    def changed(self, component: str) -> None:
        for stream in self.streams:
            stream.mark(component)

    def join(self) -> Stream | None:
        if len(self.streams) >= self.limit:
            self.refused += 1
            return None
        stream = Stream()
        self.streams.add(stream)
        return stream

    def leave(self, stream: Stream) -> None:
        self.streams.discard(stream)
