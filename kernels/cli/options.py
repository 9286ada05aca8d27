"""The job options shared by the launcher and the worker, generated from the job's sections.

Every field of ``JobConfig`` (the contract's ``TrainerJob`` sections plus ``--nproc`` and ``--job-id``) is an
option, named by ``myolo.events.payloads.trainer_flags`` and grouped by section in --help. Precedence: built-in
defaults < ``--config`` file (TOML or JSON, a table per section) < flags given on the command line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from myolo.common.struct_cli import with_options
from myolo.events.payloads.trainer_fields import trainer_fields
from myolo.kernels.train.config import JobConfig, JobConfigError

FIELDS = trainer_fields(JobConfig)


def build_job(config: Path | None, given: Mapping[str, Any]) -> JobConfig:
    """The job the flags (by field path) and the job file describe."""
    if config is not None:
        return JobConfig.load(config, given)
    return JobConfig.from_fields(given)


Runner = Callable[[JobConfig, bool], None]


def make_command(runner: Runner) -> Callable[..., None]:
    """A Typer command with every job option that hands the resolved JobConfig to ``runner``."""

    @with_options(FIELDS, into="given", panel=lambda f: f.section.title() or "Launch")
    def command(
        config: Annotated[Path | None, typer.Option(help="Job file (TOML or JSON); flags override it.")] = None,
        json_output: Annotated[bool, typer.Option("--json", help="One JSON object per step on stdout.")] = False,
        given: dict[str, Any] | None = None,
    ) -> None:
        try:
            job = build_job(config, given or {})
        except JobConfigError as exc:
            typer.echo(f"myolo-train: error: {exc}", err=True)
            raise typer.Exit(2) from None
        runner(job, json_output)

    return command
