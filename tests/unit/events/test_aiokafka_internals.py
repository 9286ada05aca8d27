"""The pace on aiokafka's metadata updates, with a plain fake client and a fake clock."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from myolo.events.aiokafka_internals import AiokafkaChanged, pace_metadata_updates


@dataclass
class FakeTime:
    now: float = 0.0
    waits: list[float] = field(default_factory=list)

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


class FakeClient:
    def __init__(self, t: FakeTime, takes_s: float = 0.0, ok: bool = False) -> None:
        self._retry_backoff = 0.1
        self.t, self.takes_s, self.ok = t, takes_s, ok
        self.started: list[float] = []

    async def _metadata_update(self, cluster: object, topics: object) -> bool:
        self.started.append(self.t.now)
        self.t.now += self.takes_s
        return self.ok


@dataclass
class Owner:
    client: FakeClient


def test_updates_that_fail_at_once_start_a_back_off_apart() -> None:
    t = FakeTime()
    owner = Owner(FakeClient(t))
    pace_metadata_updates(owner, monotonic=t.monotonic, sleep=t.sleep)  # type: ignore[arg-type]

    async def storm() -> list[bool]:
        return [await owner.client._metadata_update(None, None) for _ in range(5)]

    assert asyncio.run(storm()) == [False] * 5  # the update's own answer goes through
    assert owner.client.started == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4])


def test_a_slow_update_is_not_made_to_wait_again() -> None:
    t = FakeTime()
    owner = Owner(FakeClient(t, takes_s=0.5, ok=True))
    pace_metadata_updates(owner, monotonic=t.monotonic, sleep=t.sleep)  # type: ignore[arg-type]

    async def two() -> None:
        await owner.client._metadata_update(None, None)
        await owner.client._metadata_update(None, None)

    asyncio.run(two())
    assert owner.client.started == [0.0, 0.5] and t.waits == []


def test_an_aiokafka_without_the_hook_is_named() -> None:
    class Bare:
        client = object()

    with pytest.raises(AiokafkaChanged, match="_metadata_update"):
        pace_metadata_updates(Bare())  # type: ignore[arg-type]
