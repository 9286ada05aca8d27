"""What the operator CLIs of ``kernels/`` share: one command as a Typer app, and the exit-2 refusal."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, NoReturn

import typer

from myolo.common.logs import configure_logging


def fail(prog: str, message: str) -> NoReturn:
    """A wrong input: its message on stderr, exit 2."""
    typer.echo(f"{prog}: error: {message}", err=True)
    raise typer.Exit(2)


def build(command: Callable[..., Any], help: str) -> typer.Typer:
    """``command`` as a one-command Typer app (what tests invoke in-process)."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command(help=help)(command)
    return app


def run(command: Callable[..., Any], help: str, *, log_level: str = "info") -> None:
    """Run ``command`` as the process's only command; logs go to stderr (stdout carries the result)."""
    configure_logging(log_level, stream=sys.stderr)
    build(command, help)()
