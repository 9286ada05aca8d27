"""The ``profile`` command on this node: which worker it means, checked before it is accepted (a job or rank
with no running worker here, or no py-spy, is rejected naming why), then py-spy on it."""

from __future__ import annotations

from collections.abc import Callable

from myolo.agent.commands import ArgsError
from myolo.agent.profile.profiler import Profiler, find_py_spy
from myolo.events.payloads import WorkerInfo
from myolo.events.payloads.commands import ProfileArgs, ProfileResult


def worker_of(workers: list[WorkerInfo], job_id: str, rank: int, generation: int | None) -> WorkerInfo:
    """The running worker of ``job_id``'s ``rank`` here (of ``generation`` when given, else the newest)."""
    found = [
        w
        for w in workers
        if w.job_id == job_id
        and w.rank == rank
        and w.state in ("starting", "running")
        and (generation is None or w.generation == generation)
    ]
    if not found:
        which = f" in generation {generation}" if generation is not None else ""
        raise ArgsError(
            f"no running worker of job {job_id!r} with rank {rank}{which} on this node; "
            "`myoloctl describe job` shows where each rank runs",
            "args.rank",
        )
    return max(found, key=lambda w: w.generation)


def profile_action(workers: Callable[[], list[WorkerInfo]], profiler: Profiler):
    """(the admission check, the action) of ``profile``, for the executor's tables."""

    async def admit(args: ProfileArgs) -> None:
        worker_of(workers(), args.job_id, args.rank, args.generation)
        if find_py_spy(profiler.py_spy) is None:
            raise ArgsError("py-spy is not installed on this node: `pip install py-spy` where the agent runs", "action")

    async def profile(args: ProfileArgs) -> ProfileResult:
        w = worker_of(workers(), args.job_id, args.rank, args.generation)
        rec = await profiler.run(
            args.profile_id, args.job_id, args.rank, w.pid, args.duration_s, args.rate_hz, args.native
        )
        return ProfileResult(
            profile_id=args.profile_id,
            job_id=args.job_id,
            rank=args.rank,
            pid=w.pid,
            samples=rec.samples,
            seconds=rec.seconds,
            ended_early=rec.ended_early,
        )

    return admit, profile
