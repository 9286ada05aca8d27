"""Job validation: each bad layout or batch fails at once with what to change; the learning-rate schedule."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from myolo.kernels.parallel.layout import Layout
from myolo.kernels.train.config import JobConfig, JobConfigError
from myolo.kernels.train.session import lr_lambda


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
    ("kw", "message", "field"),
    [
        ({"nproc": 6, "pp": 2, "tp": 2}, "does not divide the world size 6", "pp"),
        ({"nproc": 3, "tp": 2}, "does not divide the world size 3", "tp"),
        ({"nproc": 4, "tp": 2, "dp": 3}, "set --dp 2", "dp"),
        ({"nproc": 4, "tp": 4, "model_args": {"n_heads": 2, "dim": 32}}, "not divisible by tp=4", "tp"),
        ({"nproc": 2, "tp": 2, "model_args": {"vocab_size": 255}}, "pad model_args.vocab_size", "model_args"),
        ({"nproc": 4, "pp": 4, "global_batch": 8, "micro_batch": 4}, "fewer than the 4 pipeline stages", "micro_batch"),
        ({"nproc": 4, "dp": 4, "global_batch": 6}, "not divisible by dp=4", "global_batch"),
        ({"nproc": 2, "global_batch": 8, "micro_batch": 3}, "not divisible by --micro-batch 3", "micro_batch"),
        ({"nproc": 2, "tp": 2, "seq_len": 63}, "--seq-len 63 must be divisible by tp=2", "seq_len"),
        ({"nproc": 1, "seq_len": 512}, "exceeds model max_seq_len 256", "seq_len"),
        ({"nproc": 2, "pp": 2, "schedule": "interleaved1f1b"}, "--stages-per-rank >= 2", "stages_per_rank"),
        ({"nproc": 2, "pp": 2, "stages_per_rank": 2}, "set --stages-per-rank 1", "stages_per_rank"),
        ({"nproc": 8, "pp": 8}, "8 pipeline stages exceed the model's 4 layers", "pp"),
        (
            {
                "nproc": 2,
                "pp": 2,
                "schedule": "interleaved1f1b",
                "stages_per_rank": 2,
                "global_batch": 6,
                "micro_batch": 2,
            },
            "to be a multiple of pp=2",
            "micro_batch",
        ),
        ({"nproc": 2, "pp": 2, "schedule": "zb"}, "unknown; choose one of", "schedule"),
        ({"nproc": 1, "sync_every": 4}, "needs dp > 1", "sync_every"),
        ({"nproc": 1, "resume": True}, "--resume needs --checkpoint-dir", "checkpoint_dir"),
        ({"nproc": 2, "tp": 2, "compile": True}, "drop --compile, or use --tp 1", "compile"),
        ({"nproc": 1, "model": "huge"}, "unknown model preset", "model"),
        ({"nproc": 1, "model_args": {"depth": 3}}, "unknown model option(s) ['depth']", "model_args"),
        ({"nproc": 1, "model_args": {"ffn_hidden": -1}}, "model.ffn_hidden must be > 0", "model_args"),
        ({"nproc": 1, "steps": 0}, "--steps must be >= 1", "steps"),
        ({"nproc": 1, "micro_batch": -1}, "--micro-batch must be >= 0", "micro_batch"),
        ({"nproc": 1, "lr": 0.0}, "--lr must be > 0", "lr"),
        ({"nproc": 1, "device": "gpu"}, "--device must be auto, cpu or cuda", "device"),
        ({"nproc": 1, "defense": "noise"}, "--defense must be one of ['none', 'gradient_compression']", "defense"),
        ({"nproc": 1, "defense": "gradient_compression", "defense_param": 0.0}, "--param", "defense_param"),
        ({"nproc": 1, "defense": "gradient_compression", "defense_param": 1.5}, "must be in (0, 1]", "defense_param"),
        (
            {"nproc": 1, "defense": "gradient_compression", "defense_momentum": 1.0},
            "--defense-momentum must be in [0, 1)",
            "defense_momentum",
        ),
        (
            {"nproc": 1, "defense": "gradient_compression", "defense_exchange": "weights"},
            "--defense-exchange must be one of ['gradient', 'update']",
            "defense_exchange",
        ),
        (
            {"nproc": 1, "defense": "gradient_compression", "defense_warmup_steps": -3},
            "--defense-warmup-steps must be a whole number >= 0",
            "defense_warmup_steps",
        ),
        (
            {"nproc": 1, "defense": "gradient_compression", "defense_vocab_param": 1.5},
            "--defense-vocab-param (the share of the vocabulary's rows drawn per step) must be in (0, 1]",
            "defense_vocab_param",
        ),
        ({"nproc": 2, "defense": "gradient_compression", "sync_every": 4}, "use one of them", "defense"),
        ({"nproc": 1, "watermark": ""}, "--watermark must be a key file path", "watermark"),
    ],
)
def test_bad_configs_say_what_to_change_and_name_the_field(kw: dict, message: str, field: str) -> None:
    with pytest.raises(JobConfigError, match=re.escape(message)) as caught:
        JobConfig(**kw).validate()
    assert caught.value.field == field


def test_config_file_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    path.write_text('model = "tiny"\nsteps = 7\ntp = 2\n[model_args]\nn_layers = 2\n')
    job = JobConfig.load(path, steps=3)
    assert (job.steps, job.tp, job.model_args) == (3, 2, {"n_layers": 2})
    path.write_text("stepz = 1\n")
    with pytest.raises(JobConfigError, match=r"unknown job option\(s\) \['stepz'\]") as caught:
        JobConfig.load(path)
    assert caught.value.field == "stepz"
    again = JobConfig.from_dict(json.loads(job.to_json()))
    assert again == job


def test_lr_schedule_warms_up_then_decays() -> None:
    f = lr_lambda(JobConfig(steps=10, warmup_steps=2, min_lr_ratio=0.1))
    assert f(0) == 0.5 and f(1) == 1.0
    assert f(2) == pytest.approx(1.0)
    assert f(10) == pytest.approx(0.1)
    assert all(f(i) >= f(i + 1) for i in range(2, 10))


def test_a_watermark_key_file_others_can_read_stops_the_run_naming_the_flag(tmp_path) -> None:
    from myolo.kernels.train.guards import open_watermark

    key = tmp_path / "wm.key"
    key.write_text("ab" * 32)
    key.chmod(0o644)
    with pytest.raises(JobConfigError, match=r"--watermark: .*chmod 600") as caught:
        open_watermark(JobConfig(watermark=str(key)))
    assert caught.value.field == "watermark"
    key.chmod(0o600)
    assert open_watermark(JobConfig(watermark=str(key))) is not None
    assert open_watermark(JobConfig()) is None
