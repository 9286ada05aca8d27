"""When a wave's bake is over: each job the wave displaced is judged on its training after it came back.

Uncordoning a wave's nodes makes the jobs that left them grow back: a generation restart (workers stopped and
started again, rendezvous, checkpoint restored) that takes as long as the machines and their load make it,
whatever the release. Judged over a window that starts at the uncordon, a restart longer than the bake
leaves no progress in it and fails the throughput gate of a good release. So a job's bake window starts once
it trains on the layout it took after the upgrade (its generation's first step), and the wave is judged when
every such job has trained ``bake_s`` since. A job not back within ``upgrade_timeout_s`` of the upgrade (or
``bake_s``, the longer) is judged on what it reported since the upgrade: a release that stops training still
fails the gate.
"""

from __future__ import annotations

from collections.abc import Iterable

from myolo.coordinator.jobs.interface import Training


def window_starts(trainings: Iterable[Training], judged: Iterable[str], upgraded_at: float) -> dict[str, float | None]:
    """Each judged job's bake window start: the first step of the generation it runs (the upgrade, if that
    generation trained before it); None while it is not training again. A job deleted or ended since (no
    longer among the ``trainings``) is not waited for (its window starts at the upgrade)."""
    by_name = {t.job: t for t in trainings}
    starts: dict[str, float | None] = {}
    for name in judged:
        t = by_name.get(name)
        if t is None:
            starts[name] = upgraded_at
            continue
        first = t.first_step_at if t.running else None
        starts[name] = None if first is None else max(upgraded_at, first)
    return starts


def over(starts: dict[str, float | None], upgraded_at: float, now: float, bake_s: float, timeout_s: float) -> bool:
    """Whether every judged job has trained ``bake_s`` since its window started, or the wait for them is over."""
    if now >= upgraded_at + max(bake_s, timeout_s):
        return True
    return all(s is not None and now >= s + bake_s for s in starts.values())
