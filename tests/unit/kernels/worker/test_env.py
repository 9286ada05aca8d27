"""WorkerEnv.from_environ: the torchrun-style environment, parsed with errors that name the variable."""

from __future__ import annotations

import pytest

from myolo.kernels.worker import WorkerEnv, WorkerEnvError

BASE = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29500"}


def test_parses_full_environment() -> None:
    env = WorkerEnv.from_environ(
        {
            **BASE,
            "LOCAL_WORLD_SIZE": "2",
            "MYOLO_JOB_ID": "job-7",
            "MYOLO_GENERATION": "3",
            "MYOLO_ZMQ_PROGRESS": "tcp://127.0.0.1:5555",
            "MYOLO_ZMQ_CONTROL": "ipc:///tmp/ctl.sock",
        }
    )
    assert env == WorkerEnv(
        rank=1,
        world_size=4,
        local_rank=1,
        local_world_size=2,
        master_addr="10.0.0.5",
        master_port=29500,
        job_id="job-7",
        generation=3,
        progress_endpoint="tcp://127.0.0.1:5555",
        control_endpoint="ipc:///tmp/ctl.sock",
    )
    assert not env.standalone


def test_defaults_when_run_standalone() -> None:
    env = WorkerEnv.from_environ(BASE)
    assert (env.job_id, env.generation, env.local_world_size) == ("local", 0, 4)
    assert env.progress_endpoint is None and env.control_endpoint is None and env.standalone


@pytest.mark.parametrize("missing", ["RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"])
def test_missing_variable_is_named(missing: str) -> None:
    env = {k: v for k, v in BASE.items() if k != missing}
    with pytest.raises(WorkerEnvError, match=rf"^{missing} is not set: set {missing} to"):
        WorkerEnv.from_environ(env)


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("RANK", "x", "RANK='x' is not an integer"),
        ("RANK", "4", r"RANK=4 is out of range: it must be in 0\.\.3"),
        ("WORLD_SIZE", "0", "WORLD_SIZE=0 is out of range"),
        ("MASTER_PORT", "70000", r"MASTER_PORT=70000 is out of range: it must be in 1\.\.65535"),
        ("LOCAL_RANK", "-1", "LOCAL_RANK=-1 is out of range"),
        ("MYOLO_GENERATION", "two", "MYOLO_GENERATION='two' is not an integer"),
        ("MYOLO_ZMQ_PROGRESS", "localhost:5555", "MYOLO_ZMQ_PROGRESS='localhost:5555' is not a ZeroMQ endpoint"),
        ("MYOLO_ZMQ_CONTROL", "http://x:1", "MYOLO_ZMQ_CONTROL='http://x:1' is not a ZeroMQ endpoint"),
    ],
)
def test_bad_value_is_named_with_reason(name: str, value: str, reason: str) -> None:
    with pytest.raises(WorkerEnvError, match=reason):
        WorkerEnv.from_environ({**BASE, name: value})


def test_local_rank_checked_against_local_world_size() -> None:
    with pytest.raises(WorkerEnvError, match=r"LOCAL_RANK=1 is out of range: it must be in 0\.\.0"):
        WorkerEnv.from_environ({**BASE, "LOCAL_WORLD_SIZE": "1"})
