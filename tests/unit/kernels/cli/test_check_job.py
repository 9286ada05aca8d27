"""``python -m myolo.kernels.cli.check_job``: the agent's way to ask the trainer about a job. It never imports torch,
answers every readable request with a verdict naming the field at fault, and refuses unreadable input."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest

from myolo.events.payloads.trainer_job import TrainerJob
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
        'for job in (\'{}\', \'{"tp": 2, "model": "small"}\', \'{"model": "huge"}\'):\n'
        '    judge(read_request((\'{"job": %s, "world_size": 4}\' % job).encode()))\n'
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_a_good_job_is_ok_on_stdout_with_exit_0() -> None:
    proc = run_checker(b'{"job": {"model": "tiny", "tp": 2, "global_batch": 8}, "world_size": 4}')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [b'{"ok":true}']


def test_a_bad_job_is_a_verdict_with_exit_0() -> None:
    proc = run_checker(b'{"job": {"model": "huge"}, "world_size": 1}')
    assert proc.returncode == 0, proc.stderr
    verdict = json.loads(proc.stdout)
    assert (verdict["ok"], verdict["field"]) == (False, "job.model")
    assert "unknown model preset 'huge'" in verdict["reason"]


@pytest.mark.parametrize(
    ("job", "world_size", "field", "says"),
    [
        ({"model": "huge"}, 1, "job.model", "choose one of ['1b', 'small', 'tiny']"),
        ({"tp": 2}, 3, "job.tp", "does not divide the world size 3"),
        ({"pp": 3}, 4, "job.pp", "does not divide the world size 4"),
        ({"pp": 2, "tp": 2}, 2, "job.pp", "does not divide the world size 2"),
        ({"dp": 3}, 4, "job.dp", "set --dp 4"),
        ({"stepz": 5}, 1, "job.stepz", "unknown job option(s) ['stepz']"),
        ({"job_id": "j"}, 1, "job.job_id", "unknown job option(s) ['job_id']"),  # the agent's, not the job's
        ({"nproc": 2}, 2, "job.nproc", "unknown job option(s) ['nproc']"),  # the world size is given apart
        ({"tp": "2"}, 2, "job.tp", "Expected `int`, got `str`"),
        ({"steps": 0}, 1, "job.steps", "Expected `int` >= 1"),
        ({"model_args": {"n_heads": 5}}, 1, "job.model_args", "must be divisible by model.n_heads"),
        ({"model_args": {"dim": 1e308}}, 1, "job.model_args", "model:"),
        ({"global_batch": 6}, 4, "job.global_batch", "not divisible by dp=4"),
        ({"resume": True}, 1, "job.checkpoint_dir", "--resume needs --checkpoint-dir"),
    ],
)
def test_a_bad_job_names_the_field(job: dict[str, Any], world_size: int, field: str, says: str) -> None:
    verdict = check(job, world_size)
    assert (verdict["ok"], verdict["field"]) == (False, field), verdict
    assert says in verdict["reason"]


def test_a_huge_unknown_option_is_named_within_a_bound() -> None:
    verdict = check({"x" * 100_000: 1}, 1)
    assert verdict["field"].startswith("job.xxx") and len(verdict["field"]) <= 200
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
    for words in (b"stdin", b"world_size", b'"ok": false', b"job.<field>", b"exit"):
        assert words in proc.stdout


# ---- one definition in effect: the wire shape the agent sends is JobConfig minus what the agent decides


def jobconfig_defaults() -> dict[str, Any]:
    return {
        f.name: f.default_factory() if f.default is dataclasses.MISSING else f.default
        for f in dataclasses.fields(JobConfig)
    }


def trainer_job_defaults() -> dict[str, Any]:
    return {
        f.name: f.default_factory() if f.default is msgspec.NODEFAULT else f.default
        for f in msgspec.structs.fields(TrainerJob)
    }


def test_trainer_job_is_jobconfig_without_what_the_agent_decides() -> None:
    """Same names and defaults: ``nproc`` is the world size the agent gives, ``job_id`` comes from its command."""
    expected = {k: v for k, v in jobconfig_defaults().items() if k not in ("nproc", "job_id")}
    assert trainer_job_defaults() == expected


def test_trainer_job_schedules_are_the_trainers() -> None:
    schedule = next(f.type for f in msgspec.structs.fields(TrainerJob) if f.name == "schedule")
    assert typing.get_args(schedule) == SCHEDULES


def test_the_trainer_job_defaults_pass_the_trainers_checks() -> None:
    assert check({}, 1) == {"ok": True}
    assert check(msgspec.to_builtins(TrainerJob(tp=2, global_batch=4)), 2) == {"ok": True}
