"""`myoloctl local up|down|status`: the local stack on this machine (for now: one Apache Kafka broker).

A thin shell over events.broker.LocalBroker; the state dir (MYOLO_STATE_DIR) is how `up`, `status`
and `down`, run as separate commands, find the same broker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from events.broker import BrokerError, LocalBroker, jars
from events.broker.state import default_state_dir

app = typer.Typer(
    help="Run the local stack (a real single-node Apache Kafka) on this machine.",
    no_args_is_help=True,
)

StateDir = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        envvar="MYOLO_STATE_DIR",
        help="Where the stack keeps its state, data and logs [default: ~/.local/state/myolo/local].",
        show_default=False,
    ),
]


def _out() -> Console:
    return Console(soft_wrap=True, highlight=False)


def _fail(err: BrokerError) -> typer.Exit:
    console = Console(stderr=True, soft_wrap=True, highlight=False)
    console.print(f"[bold red]error:[/] {err.message}", markup=True)
    console.print(f"[yellow]hint:[/] {err.hint}", markup=True)
    if err.detail:
        console.print(err.detail, markup=False, style="dim")
    return typer.Exit(1)


@app.command()
def up(
    state_dir: StateDir = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Kafka client port on 127.0.0.1 (first start; default: free)")
    ] = None,
    controller_port: Annotated[
        int | None, typer.Option("--controller-port", help="KRaft controller port (first start; default: free)")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the broker to answer.")] = 120.0,
) -> None:
    """Start the local Kafka broker (or find the one already running) and print its address."""
    out = _out()
    broker = LocalBroker(state_dir or default_state_dir(), port=port, controller_port=controller_port)
    try:
        if not jars.cached():
            out.print("Fetching Apache Kafka jars from Maven Central (first time only)...")
        with out.status("Starting Apache Kafka..."):
            started = broker.start(timeout=timeout)
        status = broker.status()
    except BrokerError as err:
        raise _fail(err) from err
    verb = "started" if started else "already running"
    out.print(f"[green]Kafka {verb}[/] at [bold]{status.bootstrap}[/] (pid {status.pid})")
    out.print(f"logs:  {status.log}")
    out.print(f"state: {broker.state_dir}")
    out.print(f"use it: export MYOLO_KAFKA_BOOTSTRAP={status.bootstrap}")


@app.command()
def status(state_dir: StateDir = None) -> None:
    """Say whether the local broker runs (exit status 0) or not (exit status 1)."""
    out = _out()
    try:
        st = LocalBroker(state_dir or default_state_dir()).status()
    except BrokerError as err:
        raise _fail(err) from err
    if st.running:
        out.print(f"[green]Kafka running[/] at [bold]{st.bootstrap}[/] (pid {st.pid}, cluster {st.cluster_id})")
        out.print(f"logs:  {st.log}")
        return
    out.print(f"[red]Kafka not running[/]: {st.detail}")
    if st.log.exists():
        out.print(f"logs:  {st.log}")
    out.print("start it with: myoloctl local up")
    raise typer.Exit(1)


@app.command()
def down(
    state_dir: StateDir = None,
    clean: Annotated[bool, typer.Option("--clean", help="Also delete topics, data and logs.")] = False,
) -> None:
    """Stop the local broker (SIGTERM, then SIGKILL after 30 s). Data is kept unless --clean."""
    out = _out()
    broker = LocalBroker(state_dir or default_state_dir())
    try:
        pid = broker.status().pid
        stopped = broker.stop()
        if clean:
            broker.clean()
    except BrokerError as err:
        raise _fail(err) from err
    if stopped:
        out.print(f"[green]Kafka stopped[/] (pid {pid})")
    else:
        out.print("Kafka was not running")
    if clean:
        out.print(f"removed data and logs in {broker.home}")
    elif broker.home.exists():
        out.print(f"data kept in {broker.home} (`myoloctl local down --clean` removes it)")
