"""Writing decisions to the compacted state topics, acknowledged by the broker before the caller acts.

The producer is idempotent with ``acks=all`` (the events package's defaults), so a write that returns is on
every in-sync replica; a caller that acts only after ``put`` returned can never act on a decision a new
leader will not find. Every record carries the coordinators' seal (:mod:`myolo.coordinator.state.seal`), which
readers check before they apply it.
"""

from __future__ import annotations

import msgspec
import structlog

from myolo.coordinator.state.codec import KIND_HEADER, StateCodec
from myolo.coordinator.state.seal import Stale, StateKeys
from myolo.events.bus import EventProducer

log = structlog.get_logger("myolo.coordinator.state")


class StateStore:
    """``put`` and ``delete`` (a tombstone) on keyed, compacted topics."""

    def __init__(self, producer: EventProducer, codec: StateCodec, keys: StateKeys) -> None:
        self._producer = producer
        self.codec = codec
        self.keys = keys
        self.writes = 0

    async def put(self, topic: str, key: str, record: msgspec.Struct) -> None:
        value, _ = self.codec.encode(record)
        await self._write(topic, key.encode(), self.codec.kind_of(record), value)

    async def delete(self, topic: str, key: str, kind: str) -> None:
        """A tombstone: compaction removes the key. The kind header tells readers what was deleted."""
        if kind not in self.codec.kinds:
            raise TypeError(f"{kind!r} is not a state record kind (known: {sorted(self.codec.kinds)})")
        await self._write(topic, key.encode(), kind, None)

    async def reseal(self, stale: Stale) -> None:
        """Write records again as they are, sealed with the current key (after a key rotation: a leader does it
        at the start of its term, so the previous key can be dropped once one has)."""
        for (topic, key), (kind, value) in stale.items():
            await self._write(topic, key, kind, value)
        if stale:
            log.info("state records sealed again with the current key", records=len(stale))

    async def _write(self, topic: str, key: bytes, kind: str, value: bytes | None) -> None:
        headers = [(KIND_HEADER, kind.encode()), self.keys.seal(topic, key, kind, value)]
        await self._producer.send_raw(topic, value, key, headers)
        self.writes += 1
