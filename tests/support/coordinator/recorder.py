"""A stand-in for the coordinator's two Kafka producers that records what would be written, in order."""

from __future__ import annotations

from typing import Any

from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.core.coordinator import state_codec
from myolo.events.envelope import Event, new_event
from myolo.events.payloads import Payload


class RecordingProducer:
    def __init__(self, log: list[tuple[str, Any]]) -> None:
        self.log = log
        self.codec = state_codec(COMPONENTS)

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, payload: Payload | Event, topic: str | None = None) -> Event:
        event = payload if isinstance(payload, Event) else new_event(payload, "test")
        self.log.append(("send", event.data))
        return event

    async def send_raw(self, topic: str, value: bytes | None, key: bytes | None, headers: list) -> None:
        record = None if value is None else self.codec.decode(value, headers)
        self.log.append((topic, record))


def recording_producers() -> tuple[list[tuple[str, Any]], tuple[RecordingProducer, RecordingProducer]]:
    log: list[tuple[str, Any]] = []
    return log, (RecordingProducer(log), RecordingProducer(log))
