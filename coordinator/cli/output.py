"""How a command prints an answer: ``-o table|json|yaml``, and the console it prints on."""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from typing import Annotated, Any

import msgspec
import typer
import yaml
from rich.console import Console


class Output(enum.StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


OutputOption = Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")]


def new_console() -> Console:
    """stdout, never wrapped, nothing highlighted that the command did not colour."""
    return Console(soft_wrap=True, highlight=False)


def data(answer: Any) -> Any:
    """An answer as JSON-ready data (Structs, at any depth, as the keys the server sent), for ``-o json|yaml`` and
    tables."""
    return msgspec.to_builtins(answer)


def print_body(answer: Any, output: Output, printer: Callable[[Console], None]) -> None:
    """The answer as JSON or YAML, as the API sent it; or, for a table, what ``printer`` makes of it."""
    console = new_console()
    if output is Output.json:
        console.out(json.dumps(data(answer), indent=2), highlight=False)
    elif output is Output.yaml:
        console.out(yaml.safe_dump(data(answer), sort_keys=False).rstrip(), highlight=False)
    else:
        printer(console)
