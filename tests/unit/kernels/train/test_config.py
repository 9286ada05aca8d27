"""Job validation: each bad layout or batch fails at once with what to change; the learning-rate schedule."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import structlog

from myolo.events.payloads.trainer_job import OptimizerSection
from myolo.kernels.parallel.layout import Layout
from myolo.kernels.train.config import JobConfig, JobConfigError
from myolo.kernels.train.session import lr_lambda


def job(**fields: object) -> JobConfig:
    """A job from fields by path, ``__`` for the dot: ``job(parallelism__tp=2)``."""
    return JobConfig.from_fields({k.replace("__", "."): v for k, v in fields.items()})


def test_default_layout_and_accumulation_follow_dp() -> None:
    j = job(nproc=8, parallelism__tp=2, data__global_batch=16, data__micro_batch=2).validate()
    assert j.layout() == Layout(pp=1, dp=4, tp=2)
    assert j.n_microbatches() == 2  # 16 rows / 4 replicas / 2 per microbatch
    j = job(nproc=2, parallelism__tp=2, data__global_batch=16, data__micro_batch=2).validate()
    assert j.n_microbatches() == 8  # same global batch, fewer replicas -> more accumulation


def test_pipeline_default_microbatches_fill_the_stages() -> None:
    j = job(nproc=4, parallelism__pp=2, parallelism__tp=2, data__global_batch=8).validate()
    assert j.n_microbatches() == 2  # one microbatch per stage by default
    assert j.micro_rows() * j.n_microbatches() == 8


GC = "gradient_compression"


@pytest.mark.parametrize(
    ("fields", "message", "field"),
    [
        ({"nproc": 6, "parallelism.pp": 2, "parallelism.tp": 2}, "does not divide the world size 6", "parallelism.pp"),
        ({"nproc": 3, "parallelism.tp": 2}, "does not divide the world size 3", "parallelism.tp"),
        ({"nproc": 4, "parallelism.tp": 2, "parallelism.dp": 3}, "set --dp 2", "parallelism.dp"),
        (
            {"nproc": 4, "parallelism.tp": 4, "model.args": {"n_heads": 2, "dim": 32}},
            "not divisible by tp=4",
            "parallelism.tp",
        ),
        ({"nproc": 2, "parallelism.tp": 2, "model.args": {"vocab_size": 255}}, "pad --model-arg", "model.args"),
        (
            {"nproc": 4, "parallelism.pp": 4, "data.global_batch": 8, "data.micro_batch": 4},
            "fewer than the 4 pipeline stages",
            "data.micro_batch",
        ),
        ({"nproc": 4, "parallelism.dp": 4, "data.global_batch": 6}, "not divisible by dp=4", "data.global_batch"),
        (
            {"nproc": 2, "data.global_batch": 8, "data.micro_batch": 3},
            "not divisible by the micro batch 3",
            "data.micro_batch",
        ),
        (
            {"nproc": 2, "parallelism.tp": 2, "data.seq_len": 63},
            "(--seq-len): 63 must be divisible by tp=2",
            "data.seq_len",
        ),
        ({"nproc": 1, "data.seq_len": 512}, "exceeds the model's max_seq_len 256", "data.seq_len"),
        (
            {"nproc": 2, "parallelism.pp": 2, "parallelism.schedule": "interleaved1f1b"},
            "(--stages-per-rank): schedule interleaved1f1b needs 2 or more",
            "parallelism.stages_per_rank",
        ),
        (
            {"nproc": 2, "parallelism.pp": 2, "parallelism.stages_per_rank": 2},
            "set it to 1",
            "parallelism.stages_per_rank",
        ),
        ({"nproc": 8, "parallelism.pp": 8}, "8 pipeline stages exceed the model's 4 layers", "parallelism.pp"),
        (
            {
                "nproc": 2,
                "parallelism.pp": 2,
                "parallelism.schedule": "interleaved1f1b",
                "parallelism.stages_per_rank": 2,
                "data.global_batch": 6,
                "data.micro_batch": 2,
            },
            "to be a multiple of pp=2",
            "data.micro_batch",
        ),
        (
            {"nproc": 2, "parallelism.pp": 2, "parallelism.schedule": "zb"},
            "Invalid enum value 'zb'",
            "parallelism.schedule",
        ),
        ({"nproc": 1, "parallelism.sync_every": 4}, "needs dp > 1", "parallelism.sync_every"),
        ({"nproc": 1, "checkpoint.resume": True}, "--resume needs the checkpoint directory", "checkpoint.dir"),
        (
            {"nproc": 2, "parallelism.tp": 2, "runtime.compile": True},
            "drop --compile, or use --tp 1",
            "runtime.compile",
        ),
        ({"nproc": 1, "model.name": "huge"}, "unknown model preset", "model.name"),
        ({"nproc": 1, "model.args": {"depth": 3}}, "unknown model option(s) ['depth']", "model.args"),
        ({"nproc": 1, "model.args": {"ffn_hidden": -1}}, "model.ffn_hidden must be > 0", "model.args"),
        ({"nproc": 1, "optimizer.steps": 0}, "optimizer.steps (--steps): Expected `int` >= 1", "optimizer.steps"),
        ({"nproc": 1, "optimizer.steps": 4, "optimizer.warmup_steps": 5}, "at most 4", "optimizer.warmup_steps"),
        ({"nproc": 1, "data.micro_batch": -1}, "(--micro-batch): Expected `int` >= 0", "data.micro_batch"),
        ({"nproc": 1, "optimizer.lr": 0.0}, "optimizer.lr (--lr): Expected `float` > 0.0", "optimizer.lr"),
        ({"nproc": 1, "runtime.device": "gpu"}, "(--device): Invalid enum value 'gpu'", "runtime.device"),
        ({"nproc": 1, "defense.kind": "noise"}, "defense.kind (--defense): Invalid enum value", "defense.kind"),
        ({"nproc": 1, "defense.kind": GC, "defense.param": 0.0}, "(--param): Expected `float` > 0.0", "defense.param"),
        ({"nproc": 1, "defense.kind": GC, "defense.param": 1.5}, "<= 1.0", "defense.param"),
        ({"nproc": 1, "defense.momentum": 1.0}, "(--defense-momentum): Expected `float` < 1.0", "defense.momentum"),
        ({"nproc": 1, "defense.exchange": "weights"}, "(--defense-exchange): Invalid enum", "defense.exchange"),
        (
            {"nproc": 1, "defense.warmup_steps": -3},
            "(--defense-warmup-steps): Expected `int` >= 0",
            "defense.warmup_steps",
        ),
        ({"nproc": 1, "defense.vocab_param": 1.5}, "(--defense-vocab-param)", "defense.vocab_param"),
        ({"nproc": 2, "defense.kind": GC, "parallelism.sync_every": 4}, "use one of them", "defense.kind"),
        ({"nproc": 1, "watermark.key_file": " "}, "(--watermark): must be the key file's path", "watermark.key_file"),
    ],
)
def test_bad_configs_say_what_to_change_and_name_the_field(fields: dict, message: str, field: str) -> None:
    with pytest.raises(JobConfigError, match=re.escape(message)) as caught:
        JobConfig.from_fields(fields).validate()
    assert caught.value.field == field


def test_a_job_built_in_python_is_held_to_the_same_bounds() -> None:
    with pytest.raises(JobConfigError) as caught:
        JobConfig(optimizer=OptimizerSection(steps=0)).validate()
    assert caught.value.field == "optimizer.steps"


def test_config_file_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    path.write_text('[model]\nname = "tiny"\nargs = {n_layers = 2}\n[optimizer]\nsteps = 7\n[parallelism]\ntp = 2\n')
    j = JobConfig.load(path, {"optimizer.steps": 3, "model.args": ["dim=32"]})
    assert (j.optimizer.steps, j.parallelism.tp, j.model.args) == (3, 2, {"n_layers": 2, "dim": 32})
    path.write_text("[optimizer]\nstepz = 1\n")
    with pytest.raises(JobConfigError, match=r"optimizer.stepz: unknown field") as caught:
        JobConfig.load(path)
    assert caught.value.field == "optimizer.stepz"
    path.write_text("warmup_stepz = 1\n")
    with pytest.raises(JobConfigError, match=r"warmup_stepz: unknown field"):
        JobConfig.load(path)
    again = JobConfig.from_dict(json.loads(j.to_json()))
    assert again == j


def test_a_job_file_written_flat_reads_as_its_sections_and_says_so(tmp_path: Path) -> None:
    """Job files from before the sections (one table: ``lr``, ``tp``, ``quant_bits``) still run."""
    flat, by_section = tmp_path / "flat.toml", tmp_path / "sections.toml"
    flat.write_text('model = "tiny"\nsteps = 7\nlr = 0.001\ntp = 2\nquant_bits = 8\ndata_path = "/d.bin"\nnproc = 2\n')
    by_section.write_text(
        'nproc = 2\n[model]\nname = "tiny"\n[optimizer]\nsteps = 7\nlr = 0.001\n[parallelism]\ntp = 2\n'
        '[quantization]\nbits = 8\n[data]\npath = "/d.bin"\n'
    )
    with structlog.testing.capture_logs() as logs:
        assert JobConfig.load(flat) == JobConfig.load(by_section)
    assert [e["file"] for e in logs if e.get("log_level") == "warning"] == [str(flat)]


def test_lr_schedule_warms_up_then_decays() -> None:
    f = lr_lambda(job(optimizer__steps=10, optimizer__warmup_steps=2, optimizer__min_lr_ratio=0.1))
    assert f(0) == 0.5 and f(1) == 1.0
    assert f(2) == pytest.approx(1.0)
    assert f(10) == pytest.approx(0.1)
    assert all(f(i) >= f(i + 1) for i in range(2, 10))


def test_a_watermark_key_file_others_can_read_stops_the_run_naming_the_flag(tmp_path) -> None:
    from myolo.kernels.train.guards import open_watermark

    key = tmp_path / "wm.key"
    key.write_text("ab" * 32)
    key.chmod(0o644)
    with pytest.raises(JobConfigError, match=r"\(--watermark\): .*chmod 600") as caught:
        open_watermark(job(watermark__key_file=str(key)))
    assert caught.value.field == "watermark.key_file"
    key.chmod(0o600)
    assert open_watermark(job(watermark__key_file=str(key))) is not None
    assert open_watermark(JobConfig()) is None
