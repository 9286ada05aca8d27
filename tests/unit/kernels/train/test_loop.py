"""The loop tells its supervisor that start-up is over before the first step: a forced heartbeat carrying the
last finished step (0 on a fresh run, the checkpoint's step on a resume), so a slow first step is not a hang."""

from __future__ import annotations

from pathlib import Path

import pytest

from myolo.kernels.train.config import JobConfig
from myolo.kernels.train.loop import Control, run

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")


def calls_of(job: JobConfig) -> list[tuple]:
    calls: list[tuple] = []
    control = Control(
        heartbeat=lambda step, force=False: calls.append(("heartbeat", step, force)),
        progress=lambda payload: calls.append(("progress", payload.step)),
    )
    run(job, control=control)
    return calls


def test_a_forced_heartbeat_at_step_0_comes_before_any_step() -> None:
    calls = calls_of(JobConfig.from_fields({"optimizer.steps": 2, "data.global_batch": 2, "data.seq_len": 16}))
    assert calls[0] == ("heartbeat", 0, True)
    assert calls[1:] == [("heartbeat", 1, False), ("progress", 1), ("heartbeat", 2, False), ("progress", 2)]


def test_a_resumed_run_reports_the_step_it_resumed_from(tmp_path: Path) -> None:
    common = {"data.global_batch": 2, "data.seq_len": 16, "checkpoint.dir": str(tmp_path), "checkpoint.every": 2}
    calls_of(JobConfig.from_fields({"optimizer.steps": 2, **common}))
    calls = calls_of(JobConfig.from_fields({"optimizer.steps": 3, "checkpoint.resume": True, **common}))
    assert calls[0] == ("heartbeat", 2, True)
    assert [c for c in calls if c[0] == "progress"] == [("progress", 3)]
