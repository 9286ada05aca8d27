"""``myoloctl cordon|uncordon NODE [--reason TEXT]``: take a node out of (or back into) scheduling.

The request may reach any coordinator; a standby redirects it to the leader, which records the decision in
its state topic before acting, under the name of the caller's token. The answer says who recorded it, under
which leadership epoch.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from myolo.coordinator.cli.client import ApiClient, ApiOption

NodeArg = Annotated[str, typer.Argument(help="Node id, as `myoloctl get nodes` lists it.")]
ReasonOption = Annotated[
    str | None, typer.Option("--reason", "-r", help="Why (recorded with the cordon; max 500 chars).")
]


def _write(node: str, reason: str | None, *, cordoned: bool, api: str | None) -> None:
    client = ApiClient.from_option(api)
    answer = client.cordon(node, reason) if cordoned else client.uncordon(node, reason)
    record = answer.cordon
    out = Console(soft_wrap=True, highlight=False)
    state = "cordoned" if record.cordoned else "uncordoned"
    out.print(f"node/{escape(answer.node_id)} [bold]{state}[/]: {escape(record.reason)}")
    out.print(escape(f"recorded by {record.by} (epoch {record.epoch}) via {client.last_url}"), style="dim")


def cordon(node: NodeArg, reason: ReasonOption = None, api: ApiOption = None) -> None:
    """Cordon NODE: it keeps running what it runs but gets no new work."""
    _write(node, reason, cordoned=True, api=api)


def uncordon(node: NodeArg, reason: ReasonOption = None, api: ApiOption = None) -> None:
    """Uncordon NODE: it may get new work again (if it is Ready and healthy)."""
    _write(node, reason, cordoned=False, api=api)
