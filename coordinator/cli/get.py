"""``myoloctl get nodes|gpus|jobs [-o table|json|yaml] [--watch]``: the fleet and its jobs, as a table or data.

``-o json|yaml`` print the API's answer unchanged (the same document for scripts as for the table), and
``--watch`` re-reads it every ``--interval`` seconds: in place on a terminal, one snapshot after another
when piped (JSON as one document per line, YAML separated by ``---``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from myolo.coordinator.cli import render
from myolo.coordinator.cli.client import ApiClient, ApiOption
from myolo.coordinator.cli.exits import err_console
from myolo.coordinator.cli.output import Output, OutputOption, data
from myolo.coordinator.core.errors import Refusal

app = typer.Typer(help="List the nodes, GPUs or elastic jobs of the cluster.", no_args_is_help=True)


WatchOption = Annotated[bool, typer.Option("--watch", "-w", help="Keep refreshing until Ctrl-C.")]
IntervalOption = Annotated[float, typer.Option("--interval", min=0.1, help="Seconds between refreshes with --watch.")]
CountOption = Annotated[
    int | None,
    typer.Option(
        "--count", min=1, help="With --watch: stop after this many refreshes (default: never).", show_default=False
    ),
]

Printer = Callable[[Console, dict[str, Any]], None]
Read = Callable[[ApiClient], Any]  # one of the client's reads: a Struct, or the fleet's JSON


@app.command("nodes")
def get_nodes(
    output: OutputOption = Output.table,
    watch: WatchOption = False,
    interval: IntervalOption = 2.0,
    count: CountOption = None,
    api: ApiOption = None,
) -> None:
    """Every node: liveness (Ready/Suspect/Lost), cordon, health, GPUs, time since the last sample."""
    _show(ApiClient.nodes, render.print_nodes, output, watch, interval, count, api)


@app.command("gpus")
def get_gpus(
    output: OutputOption = Output.table,
    watch: WatchOption = False,
    interval: IntervalOption = 2.0,
    count: CountOption = None,
    api: ApiOption = None,
) -> None:
    """Every GPU of the fleet: utilisation, memory, temperature, power, health and reasons."""
    _show(ApiClient.gpus, render.print_gpus, output, watch, interval, count, api)


def get_jobs(
    name: Annotated[str | None, typer.Argument(help="One job's name (default: every job).", show_default=False)] = None,
    output: OutputOption = Output.table,
    watch: WatchOption = False,
    interval: IntervalOption = 2.0,
    count: CountOption = None,
    api: ApiOption = None,
) -> None:
    """Elastic jobs: phase, replicas (now/min-max), generation, step/steps, loss, tokens/s, age and why.

    -o json|yaml print each job's full record: spec, generation with its nodes and ranks, progress, decisions.
    `myoloctl describe job NAME` shows one job for a person.
    """
    read: Read = ApiClient.jobs if name is None else (lambda c: c.job(name))
    _show(read, render.print_jobs, output, watch, interval, count, api)


app.command("jobs")(get_jobs)
app.command("job", hidden=True)(get_jobs)  # `get job NAME` reads as well as `get jobs NAME`


def _fetch(client: ApiClient, read: Read) -> dict[str, Any]:
    """The answer as data: what ``-o json|yaml`` print and the tables read."""
    return data(read(client))


def _print(console: Console, body: dict[str, Any], output: Output, printer: Printer, *, stream: bool) -> None:
    if output is Output.json:
        console.out(json.dumps(body) if stream else json.dumps(body, indent=2), highlight=False)
    elif output is Output.yaml:
        if stream:
            console.out("---", highlight=False)
        console.out(yaml.safe_dump(body, sort_keys=False).rstrip(), highlight=False)
    else:
        printer(console, body)


def _show(
    read: Read, printer: Printer, output: Output, watch: bool, interval: float, count: int | None, api: str | None
) -> None:
    console = Console(soft_wrap=True, highlight=False)
    client = ApiClient.from_option(api)
    if not watch:
        _print(console, _fetch(client, read), output, printer, stream=False)
        return
    if console.is_terminal and output is Output.table:
        _watch_live(console, client, read, printer, interval, count)
        return
    shown = 0
    while count is None or shown < count:
        if shown:
            time.sleep(interval)
            if output is Output.table:
                console.out("", highlight=False)
        body = _fetch_or_warn(client, read)
        if body is not None:
            _print(console, body, output, printer, stream=True)
        shown += 1


def _fetch_or_warn(client: ApiClient, read: Read) -> dict[str, Any] | None:
    """While watching, a coordinator that does not answer is a warning, not the end (a standby takes over)."""
    try:
        return _fetch(client, read)
    except Refusal as exc:
        err_console.print(f"[yellow]warning:[/] {exc.render()}", markup=True)
        return None


def _watch_live(
    console: Console, client: ApiClient, read: Read, printer: Printer, interval: float, count: int | None
) -> None:
    def frame() -> Group:
        body = _fetch_or_warn(client, read)
        capture = Console(force_terminal=True, width=console.width, color_system=console.color_system)
        with capture.capture() as cap:
            if body is None:
                capture.print("[yellow]no coordinator answered; retrying[/]")
            else:
                printer(capture, body)
        stamp = Text(f"every {interval:g}s from {client.last_url or '?'} at {time.strftime('%H:%M:%S')}", style="dim")
        return Group(stamp, Text.from_ansi(cap.get()))

    shown = 0
    try:
        with Live(frame(), console=console, auto_refresh=False) as live:
            shown = 1
            while count is None or shown < count:
                time.sleep(interval)
                live.update(frame(), refresh=True)
                shown += 1
    except KeyboardInterrupt:
        pass
