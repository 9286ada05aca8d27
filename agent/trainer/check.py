"""The trainer's own check of a job, run in the trainer's interpreter before any worker starts.

Why a subprocess: the rules (a known model, a layout that divides the world size, heads divisible by tp...)
belong to the trainer, and the agent never imports it. ``python -m myolo.kernels.cli.check_job`` answers without
importing torch, in well under a second; its verdict names the job field, which becomes ``args.job.<field>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

from myolo.agent.commands.args import ArgsError
from myolo.agent.trainer.ask import ask
from myolo.events.payloads import TrainerJob
from myolo.events.payloads.trainer_job import JobCheckResult


class TrainerBroken(ArgsError):
    """The trainer could not be asked at all (not a verdict on the job): its interpreter or its code is
    broken, which is what a trial of a trainer release looks for."""


async def check_job(
    python: Sequence[str],
    job: TrainerJob,
    world_size: int,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
) -> None:
    """Raise :class:`ArgsError` naming the field when the trainer refuses ``job`` at ``world_size``, or
    :class:`TrainerBroken` when the trainer cannot be asked (the interpreter is missing or the check does not
    answer). ``env``: the workers' (the trainer's release on PYTHONPATH); default the agent's. ``cwd``: where
    the workers run (``-m`` puts it first on the path: a source checkout there would shadow the release)."""
    request = msgspec.json.encode({"job": job, "world_size": world_size})
    try:
        answer = await ask([*python, "-m", "myolo.kernels.cli.check_job"], timeout_s, stdin=request, env=env, cwd=cwd)
    except OSError as exc:
        raise TrainerBroken(
            f"cannot run the trainer's interpreter {list(python)}: {exc}; set trainer.python", "args.job"
        ) from None
    if answer is None:
        raise TrainerBroken(f"the trainer's job check did not answer within {timeout_s:g} s", "args.job")
    try:
        verdict = msgspec.json.decode(answer.last_line(), type=JobCheckResult)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise TrainerBroken(
            f"the trainer's job check failed (exit {answer.returncode}): {answer.last_error()}", "args.job"
        ) from None
    if not verdict.ok:
        raise ArgsError(verdict.reason or "refused by the trainer", f"args.{verdict.field or 'job'}")
