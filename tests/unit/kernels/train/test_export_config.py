"""The export's job options: their rules in ``JobConfig.validate`` (what the agent's check_job answers), and
the ``myolo-train`` flags that set them."""

from __future__ import annotations

import json
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from myolo.kernels.cli.check_job import judge, read_request
from myolo.kernels.cli.options import make_command
from myolo.kernels.train.config import JobConfig, JobConfigError

EXPORTING = {"checkpoint.dir": "ckpt", "checkpoint.export_path": "out/model.safetensors"}


@pytest.mark.parametrize(
    ("job", "field", "says"),
    [
        ({"checkpoint.export_path": "m.safetensors"}, "checkpoint.dir", "--export-path needs it"),
        ({"data.eval_path": "eval.bin"}, "data.eval_path", "(--eval-data): needs --export-path"),
        ({**EXPORTING, "data.eval_batches": 0}, "data.eval_batches", "(--eval-batches): Expected `int` >= 1"),
        ({**EXPORTING, "data.path": "./out/model.safetensors"}, "checkpoint.export_path", "is also --data"),
        ({**EXPORTING, "data.eval_path": "out/model.safetensors"}, "checkpoint.export_path", "is also --eval-data"),
        ({**EXPORTING, "checkpoint.export_path": "out/"}, "checkpoint.export_path", "names a directory"),
        ({"checkpoint.init_from": " "}, "checkpoint.init_from", "(--init-from): must be a path"),
    ],
)
def test_a_bad_export_option_names_its_field(job: dict[str, Any], field: str, says: str) -> None:
    with pytest.raises(JobConfigError) as caught:
        JobConfig.from_fields(job).validate()
    assert caught.value.field == field and says in str(caught.value)


def test_good_export_options_pass_without_the_files_existing() -> None:
    """Existence is the workers' check (their directory is not the judge's)."""
    JobConfig.from_fields(
        {
            **EXPORTING,
            "data.eval_path": "held.bin",
            "checkpoint.init_from": "champion.safetensors",
            "data.eval_batches": 3,
        }
    ).validate()


def test_the_agents_check_names_the_wire_field() -> None:
    request = read_request(
        json.dumps({"job": {"checkpoint": {"export_path": "m.safetensors"}}, "world_size": 1}).encode()
    )
    verdict = judge(request)
    assert (verdict.ok, verdict.field) == (False, "job.checkpoint.dir")


def test_the_flags_set_the_fields() -> None:
    seen: list[JobConfig] = []
    app = typer.Typer()
    app.command()(make_command(lambda job, _json: seen.append(job)))
    flags = ["--checkpoint-dir", "c", "--export-path", "e.st", "--eval-data", "h.bin", "--eval-batches", "3"]
    result = CliRunner().invoke(app, [*flags, "--init-from", "i.st"])
    assert result.exit_code == 0, result.output
    (job,) = seen
    assert (job.checkpoint.export_path, job.data.eval_path, job.data.eval_batches, job.checkpoint.init_from) == (
        "e.st",
        "h.bin",
        3,
        "i.st",
    )
    assert JobConfig().data.eval_batches == 16 and JobConfig().checkpoint.export_path is None
