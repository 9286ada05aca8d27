"""Options and helpers shared by every ``myoloctl`` command group."""

from __future__ import annotations

import os
from typing import Annotated, Literal, NoReturn

import typer
from rich.console import Console

from myolo.common.errors import ConfigError
from myolo.coordinator.localstack.broker import state
from myolo.coordinator.localstack.broker.errors import BrokerError
from myolo.coordinator.localstack.security import client_settings
from myolo.events.errors import InvalidEvent
from myolo.events.settings import KafkaSettings

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


def kafka_settings(bootstrap: str | None, *, user: Literal["operator", "admin"] = "operator") -> KafkaSettings:
    """Settings for the cluster the user picked (or the local stack); exits 1 with a hint if none. A secured
    local stack is used as its read-only ``operator`` user, or as its ``admin`` by commands that write."""
    if not bootstrap and not os.environ.get("MYOLO_KAFKA_BOOTSTRAP"):
        try:
            local = client_settings(state.load(state.default_state_dir()), user)
        except (OSError, BrokerError) as exc:
            fail(f"cannot read the local stack's state: {exc}", code=1)
        if local is not None:
            return local
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
