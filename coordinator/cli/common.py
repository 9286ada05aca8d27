"""Options and helpers shared by the ``myoloctl`` commands that talk to Kafka themselves."""

from __future__ import annotations

import os
from typing import Annotated, Literal, NoReturn

import msgspec
import typer

from myolo.common.errors import ConfigError
from myolo.coordinator.cli.exits import FAILED, REFUSED, err_console, fail
from myolo.events.errors import InvalidEvent
from myolo.events.settings import KafkaSettings

__all__ = ["Bootstrap", "err_console", "invalid", "kafka_settings", "resolved"]

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


def kafka_settings(bootstrap: str | None, *, user: Literal["operator", "admin"] = "operator") -> KafkaSettings:
    """Settings for the cluster the user picked (or the local stack); exits 1 with a hint if none. A secured
    local stack is used as its read-only ``operator`` user, or as its ``admin`` by commands that write."""
    if not bootstrap and not os.environ.get("MYOLO_KAFKA_BOOTSTRAP"):
        local = _local_stack(user)
        if local is not None:
            return local
    return resolved(KafkaSettings(bootstrap=bootstrap or "", client_id="myoloctl"))


def resolved(settings: KafkaSettings) -> KafkaSettings:
    """``settings`` with their bootstrap resolved; on the operator's machine the local stack is the default."""
    try:
        return msgspec.structs.replace(settings, bootstrap=settings.resolved_bootstrap(local_fallback=True))
    except ConfigError as exc:
        fail(f"{exc.key}: {exc.reason}", FAILED)


def _local_stack(user: Literal["operator", "admin"]) -> KafkaSettings | None:
    """The local stack's client settings, when one was started here (imported only then)."""
    from myolo.coordinator.localstack.broker import state
    from myolo.coordinator.localstack.broker.errors import BrokerError
    from myolo.coordinator.localstack.security import client_settings

    try:
        return client_settings(state.load(state.default_state_dir()), user)
    except (OSError, BrokerError) as exc:
        fail(f"cannot read the local stack's state: {exc}", FAILED)


def invalid(exc: InvalidEvent) -> NoReturn:
    fail(f"invalid: {exc}", REFUSED)
