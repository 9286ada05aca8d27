"""Hang detection for one job's workers on this node, with a bound learned from the job's own steps.

Why learned: a fixed timer is either minutes late (NCCL's 10-minute default) or fires on every slow step of a
big model. The watch learns the step time from the intervals between step advances it observed, taking the
longest of the last ``window`` (so a periodic checkpoint save inside the window does not look like a hang),
and calls a worker hung when it was silent for longer than ``max(floor, factor x that)``. Until a job's first
step advance it allows ``startup_s`` (import, model build, rendezvous). Time is the agent's clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass
class Beat:
    """What the watch knows of one rank: when it was last heard (agent's monotonic clock) and its step."""

    last_heard: float
    step: int | None = None


@dataclass(frozen=True)
class Hang:
    rank: int
    last_step: int | None
    silent_s: float
    bound_s: float


@dataclass
class HangWatch:
    floor_s: float
    factor: float
    window: int
    startup_s: float
    ranks: dict[int, Beat] = field(default_factory=dict)
    _intervals: deque[float] = field(default_factory=deque)
    _step: int | None = None  # the highest step seen from any rank
    _step_at: float | None = None  # when it was first seen

    @classmethod
    def start(cls, ranks: list[int], now: float, *, floor_s: float, factor: float, window: int, startup_s: float):
        watch = cls(floor_s=floor_s, factor=factor, window=window, startup_s=startup_s)
        watch.ranks = {r: Beat(last_heard=now) for r in ranks}
        return watch

    def heard(self, rank: int, step: int | None, now: float) -> None:
        """A heartbeat or progress record of ``rank`` (its last finished step)."""
        beat = self.ranks.get(rank)
        if beat is None:
            return
        beat.last_heard = now
        if step is None:
            return
        beat.step = step if beat.step is None else max(beat.step, step)
        if self._step is None or step > self._step:
            if self._step is not None and self._step_at is not None:
                per_step = (now - self._step_at) / (step - self._step)
                self._intervals.append(per_step)
                while len(self._intervals) > self.window:
                    self._intervals.popleft()
            self._step, self._step_at = step, now

    @property
    def step_time_s(self) -> float | None:
        """The learned step time: the longest of the recent per-step intervals (None before two steps)."""
        return max(self._intervals) if self._intervals else None

    def bound_s(self) -> float:
        learned = self.step_time_s
        if learned is None:
            return max(self.floor_s, self.startup_s)
        return max(self.floor_s, self.factor * learned)

    def check(self, now: float) -> list[Hang]:
        """Every rank silent for longer than the bound, the longest silent first."""
        bound = self.bound_s()
        hung = [
            Hang(rank=r, last_step=b.step, silent_s=now - b.last_heard, bound_s=bound)
            for r, b in self.ranks.items()
            if now - b.last_heard > bound
        ]
        return sorted(hung, key=lambda h: (-h.silent_s, h.rank))

    def forget(self, rank: int) -> None:
        """A rank that exited is no longer watched (its exit is judged by its exit code)."""
        self.ranks.pop(rank, None)
