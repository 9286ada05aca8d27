"""``start_workers`` / ``stop_workers`` arguments: one definition, checked by coordinator and agent alike."""

from __future__ import annotations

from typing import Any

import pytest

from myolo.events.errors import InvalidEvent
from myolo.events.payloads.commands import StartWorkersArgs, StopWorkersArgs, action_args


def start(**over: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "job_id": "j1",
        "generation": 0,
        "node_rank": 1,
        "nnodes": 2,
        "gpus": [2, 3],
        "master_addr": "10.0.0.1",
        "master_port": 29500,
        "job": {"model": {"name": "tiny"}, "optimizer": {"steps": 5}, "checkpoint": {"dir": "/ckpt"}},
    }
    args.update(over)
    return args


def test_ranks_follow_the_torchrun_layout() -> None:
    args = action_args("start_workers", start())
    assert isinstance(args, StartWorkersArgs)
    assert args.world_size == 4
    assert [args.global_rank(i) for i in range(2)] == [2, 3]
    assert args.job.checkpoint.dir == "/ckpt" and args.job.parallelism.tp == 1


@pytest.mark.parametrize(
    ("over", "field", "words"),
    [
        ({"node_rank": 2}, "args.node_rank", "below nnodes 2"),
        ({"gpus": [1, 1]}, "args.gpus", "listed twice"),
        ({"gpus": []}, "args.gpus", "length"),
        ({"gpus": [64]}, "args.gpus[0]", "<= 63"),
        ({"master_port": 0}, "args.master_port", ">= 1"),
        ({"master_addr": "host;rm -rf"}, "args.master_addr", "regex"),
        ({"job": {"parallelism": {"tp": 0}}}, "args.job.parallelism.tp", ">= 1"),
        ({"job": {"model": {"name": "../x"}}}, "args.job.model.name", "regex"),
        ({"job": {"parallelism": {"schedule": "gpipe"}}}, "args.job.parallelism.schedule", "1f1b"),
        ({"job": {"layers": 2}}, "args.job.layers", "job takes model"),
        ({"extra": 1}, "args.extra", "it takes job_id"),
        ({"job_id": ""}, "args.job_id", "length"),
    ],
)
def test_bad_arguments_name_the_field(over: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(InvalidEvent) as err:
        action_args("start_workers", start(**over))
    assert err.value.field == field
    assert words in err.value.reason


def test_missing_argument_is_named() -> None:
    args = start()
    del args["master_addr"]
    with pytest.raises(InvalidEvent) as err:
        action_args("start_workers", args)
    assert (err.value.field, err.value.reason) == ("args.master_addr", "missing required argument")


def test_stop_workers_checkpoints_by_default() -> None:
    args = action_args("stop_workers", {"job_id": "j1", "generation": 3})
    assert args == StopWorkersArgs(job_id="j1", generation=3, checkpoint=True)
