"""Job validation: each bad layout or batch fails at once with what to change; the learning-rate schedule."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kernels.parallel.mesh import Layout
from kernels.train.config import JobConfig, JobConfigError
from kernels.train.session import lr_lambda


def test_default_layout_and_accumulation_follow_dp() -> None:
    job = JobConfig(nproc=8, tp=2, global_batch=16, micro_batch=2).validate()
    assert job.layout() == Layout(pp=1, dp=4, tp=2)
    assert job.n_microbatches() == 2  # 16 rows / 4 replicas / 2 per microbatch
    job = JobConfig(nproc=2, tp=2, global_batch=16, micro_batch=2).validate()
    assert job.n_microbatches() == 8  # same global batch, fewer replicas -> more accumulation


def test_pipeline_default_microbatches_fill_the_stages() -> None:
    job = JobConfig(nproc=4, pp=2, tp=2, global_batch=8).validate()
    assert job.n_microbatches() == 2  # one microbatch per stage by default
    assert job.micro_rows() * job.n_microbatches() == 8


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"nproc": 6, "pp": 2, "tp": 2}, "does not divide the world size 6"),
        ({"nproc": 4, "tp": 2, "dp": 3}, "set --dp 2"),
        ({"nproc": 4, "tp": 4, "model_args": {"n_heads": 2, "dim": 32}}, "not divisible by tp=4"),
        ({"nproc": 2, "tp": 2, "model_args": {"vocab_size": 255}}, "pad model_args.vocab_size"),
        ({"nproc": 4, "pp": 4, "global_batch": 8, "micro_batch": 4}, "fewer than the 4 pipeline stages"),
        ({"nproc": 4, "dp": 4, "global_batch": 6}, "not divisible by dp=4"),
        ({"nproc": 2, "global_batch": 8, "micro_batch": 3}, "not divisible by --micro-batch 3"),
        ({"nproc": 2, "tp": 2, "seq_len": 63}, "--seq-len 63 must be divisible by tp=2"),
        ({"nproc": 2, "pp": 2, "schedule": "interleaved1f1b"}, "--stages-per-rank >= 2"),
        ({"nproc": 2, "pp": 2, "schedule": "zb"}, "unknown; choose one of"),
        ({"nproc": 1, "sync_every": 4}, "needs dp > 1"),
        ({"nproc": 1, "resume": True}, "--resume needs --checkpoint-dir"),
        ({"nproc": 2, "tp": 2, "compile": True}, "drop --compile, or use --tp 1"),
        ({"nproc": 1, "model": "huge"}, "unknown model preset"),
    ],
)
def test_bad_configs_say_what_to_change(kw: dict, message: str) -> None:
    with pytest.raises(JobConfigError, match=re.escape(message)):
        JobConfig(**kw).validate()


def test_config_file_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    path.write_text('model = "tiny"\nsteps = 7\ntp = 2\n[model_args]\nn_layers = 2\n')
    job = JobConfig.load(path, steps=3)
    assert (job.steps, job.tp, job.model_args) == (3, 2, {"n_layers": 2})
    path.write_text("stepz = 1\n")
    with pytest.raises(JobConfigError, match=r"unknown job option\(s\) \['stepz'\]"):
        JobConfig.load(path)
    again = JobConfig.from_dict(json.loads(job.to_json()))
    assert again == job


def test_lr_schedule_warms_up_then_decays() -> None:
    f = lr_lambda(JobConfig(steps=10, warmup_steps=2, min_lr_ratio=0.1))
    assert f(0) == 0.5 and f(1) == 1.0
    assert f(2) == pytest.approx(1.0)
    assert f(10) == pytest.approx(0.1)
    assert all(f(i) >= f(i + 1) for i in range(2, 10))
