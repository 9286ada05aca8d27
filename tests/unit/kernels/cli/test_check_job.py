"""``python -m myolo.kernels.cli.check_job``: the agent's way to ask the trainer about a job. It never imports torch,
answers every readable request with a verdict naming the field at fault, and refuses unreadable input."""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest

from myolo.events.payloads.trainer_job import DataSection, ParallelismSection, TrainerJob
from myolo.kernels.cli.check_job import MAX_INPUT_BYTES, UnreadableInput, judge, read_request
from myolo.kernels.parallel.layout import SCHEDULES
from myolo.kernels.train.config import JobConfig

ROOT = Path(__file__).resolve().parents[4]


def check(job: dict[str, Any], world_size: int) -> dict[str, Any]:
    request = read_request(json.dumps({"job": job, "world_size": world_size}).encode())
    return msgspec.to_builtins(judge(request))


def run_checker(stdin: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "myolo.kernels.cli.check_job", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        timeout=120,
    )


def test_the_checker_never_imports_torch() -> None:
    """A good and a bad job are judged in a fresh interpreter; torch is not among its modules after."""
    code = (
        "import sys\n"
        "from myolo.kernels.cli.check_job import judge, read_request\n"
        'for job in (\'{}\', \'{"parallelism": {"tp": 2}, "model": {"name": "small"}}\', \'{"model": {"name": "huge"}}\'):\n'
        '    judge(read_request((\'{"job": %s, "world_size": 4}\' % job).encode()))\n'
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_a_good_job_is_ok_on_stdout_with_exit_0() -> None:
    proc = run_checker(
        b'{"job": {"model": {"name": "tiny"}, "parallelism": {"tp": 2}, "data": {"global_batch": 8}}, "world_size": 4}'
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [b'{"ok":true}']


def test_a_bad_job_is_a_verdict_with_exit_0() -> None:
    proc = run_checker(b'{"job": {"model": {"name": "huge"}}, "world_size": 1}')
    assert proc.returncode == 0, proc.stderr
    verdict = json.loads(proc.stdout)
    assert (verdict["ok"], verdict["field"]) == (False, "job.model.name")
    assert "unknown model preset 'huge'" in verdict["reason"]


@pytest.mark.parametrize(
    ("job", "world_size", "field", "says"),
    [
        ({"model": {"name": "huge"}}, 1, "job.model.name", "choose one of ['1b', 'small', 'tiny']"),
        ({"parallelism": {"tp": 2}}, 3, "job.parallelism.tp", "does not divide the world size 3"),
        ({"parallelism": {"pp": 3}}, 4, "job.parallelism.pp", "does not divide the world size 4"),
        ({"parallelism": {"pp": 2, "tp": 2}}, 2, "job.parallelism.pp", "does not divide the world size 2"),
        ({"parallelism": {"dp": 3}}, 4, "job.parallelism.dp", "set --dp 4"),
        ({"optimizer": {"stepz": 5}}, 1, "job.optimizer.stepz", "unknown field"),
        ({"steps": 5}, 1, "job.steps", "did you mean optimizer.steps?"),  # the flat form names its section
        ({"job_id": "j"}, 1, "job.job_id", "unknown field"),  # the agent's, not the job's
        ({"nproc": 2}, 2, "job.nproc", "unknown field"),  # the world size is given apart
        ({"parallelism": {"tp": "2"}}, 2, "job.parallelism.tp", "Expected `int`, got `str`"),
        ({"optimizer": {"steps": 0}}, 1, "job.optimizer.steps", "(--steps): Expected `int` >= 1"),
        ({"optimizer": {"warmup_steps": 30}}, 1, "job.optimizer.warmup_steps", "lower it to at most 20"),
        ({"model": {"args": {"n_heads": 5}}}, 1, "job.model.args", "must be divisible by model.n_heads"),
        ({"model": {"args": {"dim": 1e308}}}, 1, "job.model.args", "model.args (--model-arg)"),
        ({"data": {"global_batch": 6}}, 4, "job.data.global_batch", "not divisible by dp=4"),
        ({"checkpoint": {"resume": True}}, 1, "job.checkpoint.dir", "--resume needs the checkpoint directory"),
    ],
)
def test_a_bad_job_names_the_field(job: dict[str, Any], world_size: int, field: str, says: str) -> None:
    verdict = check(job, world_size)
    assert (verdict["ok"], verdict["field"]) == (False, field), verdict
    assert says in verdict["reason"]


def test_a_huge_unknown_option_is_named_within_a_bound() -> None:
    verdict = check({"optimizer": {"x" * 100_000: 1}}, 1)
    assert verdict["field"].startswith("job.optimizer.xxx") and len(verdict["field"]) <= 200
    assert len(verdict["reason"]) <= 1024


@pytest.mark.parametrize(
    ("stdin", "says"),
    [
        (b"not json", "JSON is malformed"),
        (b'{"job": [], "world_size": 2}', "at `$.job`"),
        (b'{"job": {}}', "missing required field `world_size`"),
        (b'{"job": {}, "world_size": 0}', "at `$.world_size`"),
        (b'{"job": {}, "world_size": 2, "nodes": 1}', "unknown field `nodes`"),
        (b'{"job": {"x": ' + b"[" * 50_000 + b"]" * 50_000 + b"}, " + b'"world_size": 1}', "nests deeper"),
        (b'{"job": {"model": "' + b"a" * MAX_INPUT_BYTES + b'"}, "world_size": 1}', "more than 1048576 bytes"),
    ],
)
def test_unreadable_input_is_refused(stdin: bytes, says: str) -> None:
    with pytest.raises(UnreadableInput) as caught:
        read_request(stdin)
    assert says in str(caught.value)


def test_unreadable_input_exits_2_with_the_reason_on_stderr() -> None:
    proc = run_checker(b"[" + b" " * MAX_INPUT_BYTES + b"]")
    assert proc.returncode == 2
    assert proc.stdout == b""
    assert b"more than 1048576 bytes" in proc.stderr


def test_help_says_what_goes_in_and_out() -> None:
    proc = run_checker(b"", "--help")
    assert proc.returncode == 0
    for words in (b"stdin", b"world_size", b'"ok": false', b"job.<section>.<field>", b"exit"):
        assert words in proc.stdout


# ---- one definition in effect: the trainer's job is the wire's TrainerJob plus what the agent decides


def test_jobconfig_adds_only_what_the_agent_decides() -> None:
    """``nproc`` is the world size the agent gives, ``job_id`` comes from its command; the rest is TrainerJob's."""
    added = set(JobConfig.__struct_fields__) - set(TrainerJob.__struct_fields__)
    assert added == {"nproc", "job_id"}
    assert msgspec.to_builtins(JobConfig(nproc=4, job_id="j")) == {"nproc": 4, "job_id": "j"}


def test_trainer_job_schedules_are_the_trainers() -> None:
    schedule = next(f.type for f in msgspec.structs.fields(ParallelismSection) if f.name == "schedule")
    assert typing.get_args(typing.get_args(schedule)[0]) == SCHEDULES


def test_the_trainer_job_defaults_pass_the_trainers_checks() -> None:
    assert check({}, 1) == {"ok": True}
    job = TrainerJob(parallelism=ParallelismSection(tp=2), data=DataSection(global_batch=4))
    assert check(msgspec.to_builtins(job), 2) == {"ok": True}
