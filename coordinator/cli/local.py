"""`myoloctl local up|down|status`: the local stack on this machine: Kafka, coordinators, simulated agents.

A thin shell over myolo.coordinator.localstack (its broker's LocalBroker, its processes); the state dir (MYOLO_STATE_DIR) is
how `up`, `status` and `down`, run as separate commands, find the same processes.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from myolo.coordinator.api.tokens import local_paths
from myolo.coordinator.cli import auth, render
from myolo.coordinator.cli.exits import FAILED, CliError
from myolo.coordinator.localstack import prometheus, security, stack
from myolo.coordinator.localstack.broker import BrokerError, LocalBroker, jars, state
from myolo.coordinator.localstack.broker.security import StackSecurity
from myolo.coordinator.localstack.broker.state import default_state_dir

app = typer.Typer(
    help="Run the local stack on this machine: a real Apache Kafka, coordinators and agents with simulated GPUs.",
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


def _broken(err: BrokerError) -> CliError:
    """The local stack's error as the command's failure: the message, the hint, then the detail (a log)."""
    return CliError("\n".join(filter(None, (err.message, f"hint: {err.hint}", err.detail))), FAILED)


@app.command()
def up(
    state_dir: StateDir = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Kafka client port on 127.0.0.1 (first start; default: free)")
    ] = None,
    controller_port: Annotated[
        int | None, typer.Option("--controller-port", help="KRaft controller port (first start; default: free)")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each stage to answer.")] = 120.0,
    nodes: Annotated[int, typer.Option("--nodes", "-n", min=0, max=64, help="Agents to run (node-1..N).")] = 0,
    gpus: Annotated[int, typer.Option("--gpus", "-g", min=1, max=64, help="Simulated GPUs per agent.")] = 4,
    coordinators: Annotated[
        int | None,
        typer.Option(
            "--coordinators",
            "-c",
            min=0,
            max=9,
            help="Coordinators to run (one leads). Default: 1 when --nodes is given, else 0.",
            show_default=False,
        ),
    ] = None,
    secure: Annotated[
        bool,
        typer.Option(
            "--secure",
            help="A new stack's Kafka requires SASL/SCRAM logins and enforces ACLs per role; every coordinator "
            "and agent gets its own user. A stack once secured stays secured.",
        ),
    ] = False,
    tls: Annotated[bool, typer.Option("--tls/--no-tls", help="With --secure: TLS on Kafka's client port.")] = True,
) -> None:
    """Start the local Kafka broker (or find the one already running), then C coordinators and N agents with
    simulated GPUs, each a real process. Running ones are kept; what is missing is started."""
    out = _out()
    if coordinators is None:
        coordinators = 1 if nodes else 0
    if nodes and not coordinators:
        out.print("[yellow]note:[/] agents without a coordinator only publish; nobody watches them")
    broker = LocalBroker(
        state_dir or default_state_dir(),
        port=port,
        controller_port=controller_port,
        secure=secure,
        tls=tls,
        users=security.STACK_USERS,
    )
    try:
        if not jars.cached():
            out.print("Fetching Apache Kafka jars from Maven Central (first time only)...")
        with out.status("Starting Apache Kafka..."):
            started = broker.start(timeout=timeout)
            security.create_topics(state.load(broker.state_dir))
        status = broker.status()
    except BrokerError as err:
        raise _broken(err) from err
    verb = "started" if started else "already running"
    out.print(f"[green]Kafka {verb}[/] at [bold]{status.bootstrap}[/] (pid {status.pid})")
    out.print(f"logs:  {status.log}")
    out.print(f"state: {broker.state_dir}")
    sec = broker.security
    if sec is None:
        out.print(f"use it: export MYOLO_KAFKA_BOOTSTRAP={status.bootstrap}")
    else:
        _print_security(out, sec, status.bootstrap or "")
    if coordinators or nodes:
        _up_members(out, broker.state_dir, coordinators, nodes, gpus, timeout)


def _up_members(out: Console, state_dir: Path, coordinators: int, nodes: int, gpus: int, timeout: float) -> None:
    try:
        with out.status(f"Starting {coordinators} coordinator(s) and {nodes} agent(s)..."):
            members = stack.start_members(
                state_dir, coordinators=coordinators, nodes=nodes, gpus=gpus, timeout=timeout, progress=out.print
            )
        for record, fresh in members:
            if not fresh:
                out.print(f"{record.role} {record.name} already running (pid {record.pid})")
        urls = [r.info["api_url"] for r, _ in members if r.role == stack.COORDINATOR]
        node_ids = [r.name for r, _ in members if r.role == stack.AGENT]
        if urls:
            with out.status("Waiting for a leader and for every node to be Ready..."):
                stack.wait_fleet(urls, node_ids, timeout, auth.stack_token(state_dir))
    except BrokerError as err:
        raise _broken(err) from err
    out.print(f"[green]stack ready[/]: {coordinators} coordinator(s), {nodes} node(s)")
    if urls:
        out.print(f"coordinator API: {', '.join(urls)}")
    out.print(f"signing key: {state_dir / 'signing.key'} (agents trust {state_dir / 'signing.key.pub'})")
    if urls:
        token = local_paths(state_dir)[1]
        out.print(
            f'API token: {token} (admin; myoloctl sends it to this stack; curl -H "Authorization: Bearer $(cat {token})")'
        )
    prom = prometheus.files(state_dir).config
    if prom.exists():
        out.print(f"Prometheus: prometheus --config.file={prom} (targets follow the stack; docs/metrics.md)")
    out.print("next: myoloctl get nodes ; myoloctl local status ; myoloctl local down")


def _print_security(out: Console, sec: StackSecurity, bootstrap: str) -> None:
    """How to reach a secured stack: myoloctl finds it by its state dir; other clients need the settings."""
    tls = f", CA {sec.ca_file}" if sec.tls else " (no TLS)"
    out.print(f"security: {sec.protocol} {sec.mechanism}{tls}; ACLs per role")
    out.print(f"users: {', '.join(f'{n} ({u.role})' for n, u in sorted(sec.users.items()))}")
    out.print(f"passwords: {Path(sec.folder) / 'users'}/NAME.password (mode 0600)")
    out.print("use it: myoloctl events tail TOPIC (as operator, read only); other clients, e.g. kcat as producer:")
    ca = f" -X ssl.ca.location={sec.ca_file}" if sec.tls else ""
    mechanism = "PLAIN" if sec.tls else sec.mechanism  # see localstack.broker.security: librdkafka before 2.6.1
    out.print(
        f"  kcat -b {bootstrap} -X security.protocol={sec.protocol} -X sasl.mechanisms={mechanism}{ca} "
        f"-X sasl.username=producer -X sasl.password=$(cat {sec.users['producer'].password_file}) "
        "-P -t myolo.drift.samples",
        markup=False,
    )


@app.command()
def status(state_dir: StateDir = None) -> None:
    """List the stack's processes (Kafka, coordinators, agents) with pid and health. Exit status 0 when all of
    them run, 1 otherwise."""
    out = _out()
    try:
        st = LocalBroker(state_dir or default_state_dir()).status()
        members = stack.view_members(state_dir or default_state_dir())
    except BrokerError as err:
        raise _broken(err) from err
    if st.running:
        secured = f", {st.security} with ACLs" if st.security else ""
        out.print(
            f"[green]Kafka running[/] at [bold]{st.bootstrap}[/] (pid {st.pid}, cluster {st.cluster_id}{secured})"
        )
        out.print(f"logs:  {st.log}")
    else:
        out.print(f"[red]Kafka not running[/]: {st.detail}")
        if st.log.exists():
            out.print(f"logs:  {st.log}")
        out.print("start it with: myoloctl local up")
    if members:
        out.print()
        render.table(
            out,
            ("NAME", "ROLE", "PID", "STATE", "HEALTH", "ENDPOINT", "LOG"),
            [
                [
                    m.name,
                    m.role,
                    str(m.pid),
                    render.styled("running", "green") if m.running else render.styled("exited", "bold red"),
                    render.styled(m.health, _HEALTH_STYLE.get(m.health, "yellow")),
                    m.endpoint,
                    m.log,
                ]
                for m in members
            ],
        )
    if not st.running or not all(m.running for m in members):
        raise typer.Exit(1)


_HEALTH_STYLE = {"leader": "bold green", "standby": "green", "ok": "green", "warn": "yellow", "fail": "bold red"}


@app.command()
def down(
    state_dir: StateDir = None,
    clean: Annotated[bool, typer.Option("--clean", help="Also delete topics, data and logs.")] = False,
) -> None:
    """Stop the agents, then the coordinators, then Kafka (SIGTERM, then SIGKILL). Data is kept unless --clean."""
    out = _out()
    broker = LocalBroker(state_dir or default_state_dir())
    try:
        stack.stop_members(broker.state_dir, progress=out.print)
        pid = broker.status().pid
        stopped = broker.stop()
        if clean:
            broker.clean()
    except BrokerError as err:
        raise _broken(err) from err
    if stopped:
        out.print(f"[green]Kafka stopped[/] (pid {pid})")
    else:
        out.print("Kafka was not running")
    if clean:
        for folder in ("coordinators", "agents", "api"):
            shutil.rmtree(broker.state_dir / folder, ignore_errors=True)
        for name in ("signing.key", "signing.key.pub"):
            (broker.state_dir / name).unlink(missing_ok=True)
        out.print(f"removed data and logs in {broker.home}")
    elif broker.home.exists():
        out.print(f"data kept in {broker.home} (`myoloctl local down --clean` removes it)")
