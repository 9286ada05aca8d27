"""What the dashboard shows of the rollouts: each rollout as recorded (its waves with their nodes, step, bake
deadline and gates with their figures), the coordinator's clock to count the bake down, and each change of
phase for the events timeline."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import msgspec

from myolo.coordinator.core.dashboard import Moment
from myolo.coordinator.rollouts.records import RolloutRecord


class RolloutsBoard(msgspec.Struct, kw_only=True, frozen=True):
    now: float
    items: list[RolloutRecord]  # newest first


def board(records: Iterable[RolloutRecord], now: float) -> RolloutsBoard:
    return RolloutsBoard(now=now, items=sorted(records, key=lambda r: (-r.created, r.name)))


def moments(records: Iterable[RolloutRecord]) -> Iterator[Moment]:
    for r in records:
        for c in r.status.history:
            wave = f" wave {c.wave}" if c.wave is not None else ""
            text = f"{r.spec.component} {r.spec.version}: {c.phase}{wave} ({c.by})" + (
                f": {c.reason}" if c.reason else ""
            )
            yield Moment(time=c.time, kind="rollout", subject=r.name, text=text)
