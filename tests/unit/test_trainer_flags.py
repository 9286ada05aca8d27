"""Both command lines are derived from the trainer job's one definition: every TrainerJob field has a flag in
``myoloctl train`` and in ``myolo-train``, the same flags build the same job in both, and the manifest
``myoloctl train --dry-run`` prints parses back (``parse_manifest``) into that job. Here, not under kernels or
coordinator, because it holds the two packages side by side."""

from __future__ import annotations

import typing
from typing import Any

import msgspec
import pytest
import typer
from typer.testing import CliRunner

from myolo.coordinator.cli import train as ctl_train
from myolo.coordinator.cli.main import app as myoloctl
from myolo.coordinator.jobs.manifest import parse_manifest
from myolo.events.payloads.trainer_fields import TrainerField, trainer_fields
from myolo.events.payloads.trainer_job import TrainerJob
from myolo.kernels.cli.options import make_command
from myolo.kernels.train.config import JobConfig

FIELDS = trainer_fields(TrainerJob)
# a value for the few fields that a generic one does not fit (a preset's name, a digest, a repeated key=value)
VALUES: dict[str, list[str]] = {
    "model.name": ["small"],
    "model.args": ["n_layers=2", "dim=64"],
    "runtime.ops_prefer": ["rms_norm=native,reference", "*=reference"],
    "data.sha256": ["ab" * 32],
    "checkpoint.init_from_sha256": ["cd" * 32],
}
# the fields a field's value needs beside it to make a job the manifest's checks accept (the rules between fields)
NEEDS: dict[str, list[str]] = {
    "data.sha256": ["--data", "/data/train.bin"],
    "data.eval_path": ["--export-path", "/out/model.safetensors", "--checkpoint-dir", "/ckpt"],
    "checkpoint.resume": ["--checkpoint-dir", "/ckpt"],
    "checkpoint.init_from_sha256": ["--init-from", "/in/model.safetensors"],
    "checkpoint.export_path": ["--checkpoint-dir", "/ckpt"],
    "runtime.task": [
        *("--init-from", "/in/m.safetensors", "--export-path", "/out/q.safetensors"),
        *("--quant-calib-path", "/data/calib.bin"),
    ],
}


def _sample(f: TrainerField) -> list[str]:
    """``f``'s flag with a value other than its default (a boolean: its on or off flag)."""
    if f.path in VALUES:
        return [arg for v in VALUES[f.path] for arg in (f.flag, v)]
    if f.kind is bool:
        return [f.negative if f.default else f.flag]  # type: ignore[list-item]
    base = f.annotation
    while typing.get_origin(base) is typing.Annotated:
        base = base.__origin__
    if typing.get_origin(base) is typing.Literal:
        return [f.flag, next(c for c in typing.get_args(base) if c != f.default)]
    if f.kind is str:
        return [f.flag, f"/data/{f.name}.bin"]
    if f.kind is int:
        return [f.flag, str(32 if f.default is None else f.default + 1)]
    return [f.flag, str(0.5 if not f.default else f.default / 2)]


def _kernels_job(flags: list[str]) -> TrainerJob:
    """The job ``myolo-train`` builds from ``flags``, as the contract's TrainerJob (without nproc, job_id)."""
    seen: list[JobConfig] = []
    app = typer.Typer()
    app.command()(make_command(lambda job, _json: seen.append(job)))
    result = CliRunner().invoke(app, flags)
    assert result.exit_code == 0 and seen, result.output
    return TrainerJob(**{name: getattr(seen[0], name) for name in TrainerJob.__struct_fields__})


def _options(command: Any) -> set[str]:
    click_command = typer.main.get_command(command) if isinstance(command, typer.Typer) else command
    options = [p for p in click_command.params if p.param_type_name == "option"]
    return {opt for p in options for opt in p.opts + p.secondary_opts}


def test_every_field_has_a_flag_in_both_command_lines() -> None:
    app = typer.Typer()
    app.command()(make_command(lambda job, _json: None))
    trainer = _options(app)
    ctl = _options(typer.main.get_command(myoloctl).commands["train"])  # type: ignore[attr-defined]
    for f in FIELDS:
        assert f.flag in trainer, f"myolo-train has no {f.flag} for {f.path}"
        if f.path in ctl_train.NO_FLAG:  # set by another option of myoloctl train, which says which
            assert f.flag not in ctl, f.path
            continue
        assert f.flag in ctl, f"myoloctl train has no {f.flag} for {f.path}"
        if f.negative:
            assert f.negative in trainer and f.negative in ctl, f.negative


@pytest.mark.parametrize("field", [f for f in FIELDS if f.path not in ctl_train.NO_FLAG], ids=lambda f: f.path)
def test_the_same_flags_build_the_same_job_in_both_and_through_the_manifest(field: TrainerField) -> None:
    flags = _sample(field) + NEEDS.get(field.path, [])
    expected = _kernels_job(flags)
    assert expected != TrainerJob(), f"{flags} left the job at its defaults"
    dry = CliRunner().invoke(myoloctl, ["train", "derived", *flags, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    spec = parse_manifest(dry.output)
    # the layout goes to spec.replica (each generation sets it in the job), the rest to spec.trainer
    layout = expected.parallelism
    assert (spec.tp, spec.pp) == (layout.tp, layout.pp)
    unlaid = msgspec.structs.replace(expected.parallelism, tp=1, pp=1)
    assert spec.trainer == msgspec.structs.replace(expected, parallelism=unlaid)


def test_one_job_of_many_fields_is_the_same_in_both() -> None:
    flags = [
        *("--lr", "0.001", "--tp", "2", "--pp", "2", "--model-arg", "n_layers=4", "--ops", "rms_norm=native"),
        *("--fast", "--defense", "gradient_compression", "--param", "0.1", "--data", "/d.bin", "--quant-bits", "8"),
        *("--checkpoint-dir", "/ckpt", "--export-path", "/out/m.safetensors", "--eval-data", "/e.bin"),
    ]
    expected = _kernels_job(flags)
    dry = CliRunner().invoke(myoloctl, ["train", "derived", *flags, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    spec = parse_manifest(dry.output)
    assert (spec.tp, spec.pp) == (2, 2)
    unlaid = msgspec.structs.replace(expected.parallelism, tp=1, pp=1)
    assert spec.trainer == msgspec.structs.replace(expected, parallelism=unlaid)
