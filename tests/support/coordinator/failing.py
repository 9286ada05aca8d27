"""A state store whose writes to one topic fail, as when the broker refuses them: what was in memory must stay."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import msgspec

from myolo.coordinator.state import StateStore


class WriteRefused(Exception):
    """What the store raises for a refused write (as a Kafka error would reach the caller)."""


@contextmanager
def refused_writes(store: StateStore, topic: str) -> Iterator[list[str]]:
    """Within the block, ``put`` and ``delete`` on ``topic`` raise ``WriteRefused``; other topics are written.
    Yields the keys whose writes were refused."""
    put, delete = store.put, store.delete
    refused: list[str] = []

    async def failing_put(t: str, key: str, record: msgspec.Struct) -> None:
        if t == topic:
            refused.append(key)
            raise WriteRefused(f"{topic}: write of {key!r} refused")
        await put(t, key, record)

    async def failing_delete(t: str, key: str, kind: str) -> None:
        if t == topic:
            refused.append(key)
            raise WriteRefused(f"{topic}: tombstone of {key!r} refused")
        await delete(t, key, kind)

    store.put, store.delete = failing_put, failing_delete  # type: ignore[method-assign]
    try:
        yield refused
    finally:
        store.put, store.delete = put, delete  # type: ignore[method-assign]
