"""Errors of configuration and validation: each names the key or field at fault and says why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


class ConfigError(Exception):
    """A configuration value that is missing or wrong; ``key`` is its dotted name (and env variable)."""

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(f"config key {key}: {reason}")


@dataclass(frozen=True)
class ValidationProblem:
    """One msgspec validation error, taken apart: ``field`` is the dotted path of the field at fault
    (``.spec.maxReplicas``; for an unknown or missing field, the path to it including its name; "" for the
    root), ``parent`` the path of the object holding it, ``kind`` what went wrong."""

    field: str
    parent: str
    kind: Literal["unknown", "missing", "other"]
    message: str


def validation_problem(exc: Exception) -> ValidationProblem:
    """Split msgspec's ``"<message> - at `$.a.b`"`` into its parts (one parser for every caller)."""
    msg, _, path = str(exc).partition(" - at `$")
    path = path.rstrip("`")
    for prefix, kind in (
        ("Object contains unknown field `", "unknown"),
        ("Object missing required field `", "missing"),
    ):
        if msg.startswith(prefix):
            name = msg.split("`")[1]
            return ValidationProblem(field=f"{path}.{name}", parent=path, kind=kind, message=msg)  # type: ignore[arg-type]
    return ValidationProblem(
        field=path, parent=path.rsplit(".", 1)[0] if "." in path else "", kind="other", message=msg
    )
