"""Options and helpers shared by every ``myoloctl`` command group."""

from __future__ import annotations

from typing import Annotated, NoReturn

import typer
from rich.console import Console

from events.errors import ConfigError, InvalidEvent
from events.settings import KafkaSettings

Bootstrap = Annotated[
    str | None,
    typer.Option(
        "--bootstrap",
        "-b",
        envvar="MYOLO_KAFKA_BOOTSTRAP",
        help="Kafka bootstrap address host:port (default: the local stack started by `myoloctl local up`).",
        show_default=False,
    ),
]

err_console = Console(stderr=True, soft_wrap=True, highlight=False)


def kafka_settings(bootstrap: str | None) -> KafkaSettings:
    """Settings for the cluster the user picked (or the local stack); exits 1 with a hint if none."""
    settings = KafkaSettings(bootstrap=bootstrap or "", client_id="myoloctl")
    try:
        settings.resolved_bootstrap()
    except ConfigError as exc:
        fail(exc.reason, code=1)
    return settings


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr, then exit: 2 for invalid input, 1 for everything else."""
    err_console.print(f"[bold red]error:[/] {message}", markup=True)
    raise typer.Exit(code)


def invalid(exc: InvalidEvent) -> NoReturn:
    fail(f"invalid: {exc}", code=2)
