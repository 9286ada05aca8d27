"""Questions to the trainer's interpreter: the job check and the versions share one bounded child process."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from myolo.agent.commands.args import ArgsError
from myolo.agent.trainer.ask import ask
from myolo.agent.trainer.check import TrainerBroken, check_job
from myolo.events.payloads import TrainerJob


def script(tmp_path: Path, body: str) -> list[str]:
    exe = tmp_path / "python"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return [str(exe)]


async def test_an_answer_its_last_line_and_its_error(tmp_path: Path) -> None:
    answer = await ask(script(tmp_path, "cat; echo; echo last; echo oops >&2; exit 3\n"), 10, stdin=b"first")
    assert answer is not None and answer.returncode == 3
    assert (answer.last_line(), answer.last_error()) == (b"last", "oops")


async def test_no_answer_in_time_is_none_and_the_child_is_gone(tmp_path: Path) -> None:
    assert await ask(script(tmp_path, "exec sleep 30\n"), 1.0) is None
    with pytest.raises(OSError):
        await ask([str(tmp_path / "missing")], 1.0)


async def test_the_trainer_refuses_a_bad_job_naming_its_field() -> None:
    with pytest.raises(ArgsError) as err:
        await check_job([sys.executable], TrainerJob.from_fields({"parallelism.tp": 3}), 4, 60)
    assert err.value.field == "args.job.parallelism.tp" and not isinstance(err.value, TrainerBroken)
    await check_job([sys.executable], TrainerJob(), 2, 60)  # a good one passes


async def test_a_broken_trainer_is_told_apart_from_a_refusal(tmp_path: Path) -> None:
    with pytest.raises(TrainerBroken, match=r"exit 1.*no module"):
        await check_job(script(tmp_path, "echo 'no module named kernels' >&2; exit 1\n"), TrainerJob(), 1, 10)
