"""Writing decisions to the compacted state topics, acknowledged by the broker before the caller acts.

The producer is idempotent with ``acks=all`` (the events package's defaults), so a write that returns is on
every in-sync replica; a caller that acts only after ``put`` returned can never act on a decision a new
leader will not find.
"""

from __future__ import annotations

import msgspec

from coordinator.state.codec import KIND_HEADER, StateCodec
from events.bus import EventProducer


class StateStore:
    """``put`` and ``delete`` (a tombstone) on keyed, compacted topics."""

    def __init__(self, producer: EventProducer, codec: StateCodec) -> None:
        self._producer = producer
        self.codec = codec
        self.writes = 0

    async def put(self, topic: str, key: str, record: msgspec.Struct) -> None:
        value, headers = self.codec.encode(record)
        await self._producer.send_raw(topic, value, key.encode(), headers)
        self.writes += 1

    async def delete(self, topic: str, key: str, kind: str) -> None:
        """A tombstone: compaction removes the key. The kind header tells readers what was deleted."""
        if kind not in self.codec.kinds:
            raise TypeError(f"{kind!r} is not a state record kind (known: {sorted(self.codec.kinds)})")
        await self._producer.send_raw(topic, None, key.encode(), [(KIND_HEADER, kind.encode())])
        self.writes += 1
