"""The event producer: idempotent, acks=all, compressed, lingering briefly to batch.

Idempotence plus ``acks=all`` means a retry after a broker restart never writes an event twice into the log,
and nothing acknowledged is lost. Every event carries the current trace context; a producer built with a
signer signs every event it sends (the coordinator's command path), last, so the signature covers the trace
context too. An event already signed by its author (a node event from the agent's spool) is sent exactly as
it was signed: adding a trace context to it would break its signature.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from aiokafka import AIOKafkaProducer
from aiokafka.structs import RecordMetadata

from myolo.common.clock import Clock
from myolo.common.keys import Signer
from myolo.events.aiokafka_internals import pace_metadata_updates
from myolo.events.codec import encode
from myolo.events.envelope import Event, new_event
from myolo.events.payloads import Payload
from myolo.events.settings import KafkaSettings
from myolo.events.signing import SIG, sign
from myolo.events.topics import topic_for_type
from myolo.events.tracing import inject_current, publish_span, tracing_enabled

DEFAULT_PRODUCER_OPTIONS: dict[str, Any] = {
    "enable_idempotence": True,
    "acks": "all",
    "compression_type": "lz4",
    "linger_ms": 5,
    "max_batch_size": 256 * 1024,
    "retry_backoff_ms": 100,
}


class EventProducer:
    """Publish typed payloads (or whole events) as CloudEvents in binary content mode."""

    def __init__(
        self,
        settings: KafkaSettings,
        *,
        source: str,
        clock: Clock | None = None,
        signer: Signer | None = None,
        **overrides: Any,
    ) -> None:
        self.source = source
        self._clock = clock
        self._signer = signer
        self._options = {**DEFAULT_PRODUCER_OPTIONS, **settings.client_kwargs(), **overrides}
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        self._producer = AIOKafkaProducer(**self._options)
        pace_metadata_updates(self._producer)
        await self._producer.start()

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()  # flushes what is pending first
            self._producer = None

    async def __aenter__(self) -> EventProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def event(self, payload: Payload, *, subject: str | None = None, key: str | None = None) -> Event:
        """Wrap a payload in an envelope from this producer's source and clock."""
        return new_event(payload, self.source, clock=self._clock, subject=subject, key=key)

    async def send(self, payload: Payload | Event, topic: str | None = None) -> Event:
        """Send and wait until the broker has acknowledged it. Returns the event as sent."""
        event, fut = await self.enqueue(payload, topic)
        await fut
        return event

    async def enqueue(
        self, payload: Payload | Event, topic: str | None = None
    ) -> tuple[Event, asyncio.Future[RecordMetadata]]:
        """Hand an event to the batching producer; the future resolves when the broker acknowledged it."""
        if self._producer is None:
            raise RuntimeError("EventProducer.start() was not called")
        event = payload if isinstance(payload, Event) else self.event(payload)
        topic = topic or topic_for_type(event.type)
        if tracing_enabled():
            with publish_span(event, topic) as ext:
                event = self._seal(event, ext)
                return event, await self._send(topic, event)
        event = self._seal(event, inject_current(event.extensions))
        return event, await self._send(topic, event)

    def _seal(self, event: Event, traced: dict[str, str]) -> Event:
        """The event as it goes out: with the trace context, then signed (ours), or untouched (its author's)."""
        if self._signer is None and SIG in event.extensions:
            return event
        if traced is not event.extensions:
            event = msgspec.structs.replace(event, extensions=traced)
        return event if self._signer is None else sign(event, self._signer)

    async def _send(self, topic: str, event: Event) -> asyncio.Future[RecordMetadata]:
        key, value, headers = encode(event)
        return await self._producer.send(topic, value=value, key=key, headers=headers)  # type: ignore[union-attr]

    async def send_raw(
        self, topic: str, value: bytes | None, key: bytes | None, headers: list[tuple[str, bytes]]
    ) -> RecordMetadata:
        """Send bytes as they are (the dead-letter path keeps the original record untouched)."""
        if self._producer is None:
            raise RuntimeError("EventProducer.start() was not called")
        return await (await self._producer.send(topic, value=value, key=key, headers=headers))

    async def flush(self) -> None:
        if self._producer is not None:
            await self._producer.flush()
