"""myolo-train's options are generated from the job's fields: every field has a flag, the flags build the same
job a job file does, and every section's rule names its field and flag. (The manifest's side is
tests/unit/coordinator/jobs/test_trainer_spec.py; both command lines side by side, tests/unit/test_trainer_flags.py.)"""

from __future__ import annotations

import msgspec
import pytest
import typer
from typer.testing import CliRunner

from myolo.events.payloads.trainer_fields import trainer_fields
from myolo.events.payloads.trainer_job import TrainerJob, TrainerJobError
from myolo.kernels.cli.options import make_command
from myolo.kernels.train.config import JobConfig


def invoke(*flags: str) -> tuple[int, str, list[JobConfig]]:
    seen: list[JobConfig] = []
    app = typer.Typer()
    app.command()(make_command(lambda job, _json: seen.append(job)))
    result = CliRunner().invoke(app, list(flags))
    return result.exit_code, result.output, seen


def test_every_field_has_a_flag_in_help() -> None:
    code, out, _ = invoke("--help")
    assert code == 0
    for f in trainer_fields(JobConfig):
        assert f.flag in out, f.path


def test_flags_build_the_job_the_same_fields_describe() -> None:
    code, out, (job,) = invoke(
        "--lr", "0.001", "--tp", "2", "--nproc", "2", "--model-arg", "n_layers=2", "--ops", "rms_norm=native",
        "--fast", "--defense", "gradient_compression", "--param", "0.1", "--data", "d.bin", "--quant-bits", "8",
    )  # fmt: skip
    assert code == 0, out
    expected = JobConfig.from_fields(
        {
            "optimizer.lr": 0.001,
            "parallelism.tp": 2,
            "nproc": 2,
            "model.args": {"n_layers": 2},
            "runtime.ops_prefer": {"rms_norm": ["native"]},
            "runtime.deterministic": False,
            "defense.kind": "gradient_compression",
            "defense.param": 0.1,
            "data.path": "d.bin",
            "quantization.bits": 8,
        }
    )
    assert job == expected
    assert JobConfig.from_dict(msgspec.json.decode(job.to_json())) == job


def test_a_bad_flag_value_names_the_field_and_the_flag() -> None:
    code, out, seen = invoke("--warmup-steps", "50", "--steps", "10")
    assert code == 0 and seen  # the rule runs in validate, as for a job file
    with pytest.raises(TrainerJobError) as caught:
        seen[0].validate()
    assert caught.value.field == "optimizer.warmup_steps" and "(--warmup-steps)" in str(caught.value)
    code, out, _ = invoke("--global-batch", "0")
    assert code == 2 and "data.global_batch (--global-batch)" in out


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"parallelism.pp": 2, "parallelism.stages_per_rank": 2}, "parallelism.stages_per_rank"),
        ({"data.sha256": "0" * 64}, "data.sha256"),
        ({"optimizer.steps": 3, "optimizer.warmup_steps": 4}, "optimizer.warmup_steps"),
        ({"checkpoint.resume": True}, "checkpoint.dir"),
        ({"checkpoint.export_path": "out/"}, "checkpoint.export_path"),
        ({"watermark.key_file": " "}, "watermark.key_file"),
        ({"quantization.calib_path": " "}, "quantization.calib_path"),
    ],
)
def test_each_sections_rule_names_its_field(fields: dict, field: str) -> None:
    job = TrainerJob.from_fields(fields)
    section = getattr(job, field.split(".")[0])
    with pytest.raises(TrainerJobError) as caught:
        section.validate()
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field} (--")
