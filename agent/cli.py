"""``myolo-agent``: the node agent's command line (run the daemon, read the GPUs once, inject faults).

Nothing here imports torch, directly or not (a test proves it): the agent must start in milliseconds and stay
small on a node whose GPUs belong to the trainers.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import typer

from myolo.agent.config import AgentConfig, load_agent_config
from myolo.common.errors import ConfigError

DEFAULT_CONFIG = Path("/etc/myolo/agent.toml")
FALLBACK_SOCKET = Path("/run/myolo/agent.sock")

app = typer.Typer(
    name="myolo-agent",
    help="Myolotrain node agent: GPU, NCCL and memory-leak telemetry published to Kafka.\n\n"
    "`run` is what systemd starts; `sample` reads the GPUs once to check a node; `inject` puts faults into a "
    "running agent's simulated GPUs for tests and demos; `fleetsim` plays thousands of simulated agents against "
    "Kafka for load tests.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

CONFIG_HELP = (
    "Agent config file (TOML). Default: /etc/myolo/agent.toml when it exists, else built-in defaults. "
    "MYOLO_* environment variables override it (kafka.bootstrap -> MYOLO_KAFKA_BOOTSTRAP)."
)
SIM_HELP = "Use N simulated GPUs instead of NVML (labelled 'sim' in every event). Overrides simulate_gpus."


def _config(path: Path | None, simulate_gpus: int | None) -> AgentConfig:
    if path is None and DEFAULT_CONFIG.exists():
        path = DEFAULT_CONFIG
    try:
        return load_agent_config(path, simulate_gpus=simulate_gpus)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


@app.command()
def run(
    config: Path | None = typer.Option(None, "--config", "-c", help=CONFIG_HELP),
    simulate_gpus: int | None = typer.Option(None, "--simulate-gpus", min=0, max=64, help=SIM_HELP),
    log_json: bool | None = typer.Option(
        None, "--log-json/--log-text", help="Log format. Default: JSON unless stderr is a terminal."
    ),
) -> None:
    """Run the agent daemon: sample every GPU each interval, publish samples, faults, NCCL and leak reports to
    Kafka (spooling to disk while Kafka is away), serve /healthz, and speak systemd's notify protocol.

    SIGTERM flushes and exits; SIGHUP reloads the config file. After an upgrade or rollback of itself it stops
    the same way, then re-executes itself or exits 75 for systemd to restart it ([releases] restart)."""
    from myolo.agent.commands import LedgerError
    from myolo.agent.daemon.assemble import build_runtime
    from myolo.agent.daemon.main import serve
    from myolo.common import memtrim
    from myolo.common.clock import SystemClock
    from myolo.common.logs import configure_logging
    from myolo.common.memtrace import start_from_env

    cfg = _config(config, simulate_gpus)
    configure_logging(cfg.log_level, json=log_json)
    try:
        start_from_env("agent")
        memtrim.start("agent")
        rt = build_runtime(
            cfg,
            SystemClock(),
            config_path=str(config or DEFAULT_CONFIG) if (config or DEFAULT_CONFIG.exists()) else None,
        )
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except LedgerError as exc:
        typer.echo(f"error: commands: {exc}", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:
        typer.echo(f"error: cannot open the spool in {cfg.spool.dir}: {exc}", err=True)
        raise typer.Exit(2) from None
    code = asyncio.run(serve(rt))
    if code == 0 and rt.restart is not None:  # an upgrade or rollback of the agent, stopped cleanly for it
        code = rt.restart.run()  # exec: does not return; under systemd: exit 75, and the unit starts it again
    raise typer.Exit(code)


@app.command()
def sample(
    as_json: bool = typer.Option(False, "--json", help="Print the sample as its event's JSON payload."),
    simulate_gpus: int | None = typer.Option(None, "--simulate-gpus", min=0, max=64, help=SIM_HELP),
    config: Path | None = typer.Option(None, "--config", "-c", help=CONFIG_HELP),
) -> None:
    """Read every GPU once and print the sample (a table, or JSON with --json). Needs no Kafka: use it to
    check a node. Exit code 0 when the node is healthy, 1 when any GPU warns or fails, 2 on errors."""
    from myolo.agent.gpu import GpuBackendError, make_backend
    from myolo.agent.gpu.render import print_sample
    from myolo.agent.gpu.sample import build_sample
    from myolo.agent.gpu.sim import SimBackend
    from myolo.agent.health import HealthState
    from myolo.agent.trainer.gpu_use import read_gpu_use
    from myolo.common.clock import SystemClock
    from myolo.common.logs import configure_logging

    configure_logging("warning")  # the GPUs' warnings go to stderr: stdout carries the sample
    cfg = _config(config, simulate_gpus)
    clock = SystemClock()
    backend = make_backend(cfg.simulate_gpus or None, clock, node_tag=cfg.node_id)
    if isinstance(backend, SimBackend):  # the running daemon's workers on these simulated GPUs
        backend.set_workload(read_gpu_use(Path(cfg.trainer.workers_dir)))
    try:
        backend.open()
    except GpuBackendError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        import myolo

        node = build_sample(backend, cfg.node_id, HealthState(clock), agent_version=myolo.__version__)
    finally:
        backend.close()
    print_sample(node, as_json=as_json)
    raise typer.Exit(0 if node.health == "ok" else 1)


@app.command()
def inject(
    gpu: int | None = typer.Option(
        None, "--gpu", min=0, help="GPU index. Required for --xid and --ecc-dbe; the others default to all GPUs."
    ),
    xid: int | None = typer.Option(None, "--xid", min=1, max=999, help="Raise XID N now (79: fallen off the bus)."),
    ecc_dbe: bool = typer.Option(False, "--ecc-dbe", help="A double-bit ECC error (with XID 48)."),
    leak_rate: str | None = typer.Option(
        None, "--leak-rate", help="Leak GPU memory at this rate, e.g. '0.5%/h' (of the GPU's memory; 0 stops it)."
    ),
    throttle: str | None = typer.Option(None, "--throttle", help="Clock throttling: thermal, power or none."),
    util: float | None = typer.Option(None, "--util", min=0, max=100, help="Hold utilisation at this percent."),
    clear: bool = typer.Option(False, "--clear", help="Clear injected faults (as after a GPU reset)."),
    socket_path: Path | None = typer.Option(
        None, "--socket", help="The agent's control socket. Default: control_socket from the config."
    ),
    config: Path | None = typer.Option(None, "--config", "-c", help=CONFIG_HELP),
) -> None:
    """Inject a fault into a RUNNING agent's simulated GPUs through its local control socket.

    Give exactly one of --xid, --ecc-dbe, --leak-rate, --throttle, --util, --clear. The agent publishes the
    resulting fault event at once. Only agents started with --simulate-gpus accept faults.

    Examples: myolo-agent inject --gpu 3 --xid 79 ; myolo-agent inject --gpu 0 --leak-rate 0.5%/h"""
    from myolo.agent.control import ControlError, InjectRequest, call

    req = InjectRequest(
        gpu=gpu, xid=xid, ecc_dbe=ecc_dbe, leak_rate=leak_rate, throttle=throttle, util=util, clear=clear
    )
    actions = req.actions()
    if len(actions) != 1:
        given = ", ".join("--" + a.replace("_", "-") for a in actions) or "none"
        typer.echo(
            f"error: give exactly one of --xid, --ecc-dbe, --leak-rate, --throttle, --util, --clear (got {given})",
            err=True,
        )
        raise typer.Exit(2)
    if actions[0] in ("xid", "ecc_dbe") and gpu is None:
        typer.echo(f"error: --{actions[0].replace('_', '-')} needs --gpu I", err=True)
        raise typer.Exit(2)
    path = socket_path or _socket_from_config(config)
    try:
        reply = call(path, req)
    except ControlError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if not reply.ok:
        typer.echo(f"error: {reply.error}", err=True)
        raise typer.Exit(1)
    typer.echo(reply.message)


@app.command()
def status(
    socket_path: Path | None = typer.Option(None, "--socket", help="The agent's control socket."),
    config: Path | None = typer.Option(None, "--config", "-c", help=CONFIG_HELP),
) -> None:
    """One line about a running agent (GPUs, Kafka, spool), through its control socket; then where its health
    endpoint listens."""
    from myolo.agent.control import ControlError, StatusRequest, call

    try:
        reply = call(socket_path or _socket_from_config(config), StatusRequest())
    except ControlError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"{reply.data.get('status')}: {reply.message}")
    if reply.data.get("health_url"):
        typer.echo(f"health endpoint: {reply.data['health_url']}/healthz")
    workers = reply.data.get("workers") or []
    if workers:
        typer.echo("workers:")
    for w in workers if isinstance(workers, list) else []:
        step = "-" if w.get("last_step") is None else w.get("last_step")
        typer.echo(
            f"  job {w.get('job_id')} g{w.get('generation')} rank {w.get('rank')} gpu {w.get('gpu')} "
            f"pid {w.get('pid')} {w.get('state')} step {step}"
        )


key_app = typer.Typer(help="The node's signing key: `key show` prints what `myoloctl node enroll` registers.")
app.add_typer(key_app, name="key")


@key_app.command("show")
def key_show(
    config: Path | None = typer.Option(None, "--config", "-c", help=CONFIG_HELP),
    generate: bool = typer.Option(False, "--generate", help="Make the key now if the agent has not made it yet."),
    pem: bool = typer.Option(False, "--pem", help="Print the public key PEM only."),
) -> None:
    """Print this node's id, its key id and its public key (PEM), for `myoloctl node enroll`. The key signs the
    node's faults, command acks and training faults and completions; it is <data_dir>/node.key by default
    ([identity] key_file), made at the agent's first start, mode 0600."""
    from myolo.agent.identity import node_key

    cfg = _config(config, None)
    try:
        key = node_key(cfg.identity, create=generate)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if not pem:
        typer.echo(f"node id:  {cfg.node_id}\nkey id:   {key.key_id}\nkey file: {cfg.identity.key_file}")
    typer.echo(key.public.pem().rstrip("\n"))


def _mount_fleetsim() -> None:
    """``myolo-agent fleetsim``: the fleet simulator (agent/fleetsim) lives beside the agent it imitates."""
    from myolo.agent.fleetsim.cli import fleetsim_command

    app.command("fleetsim")(fleetsim_command)


_mount_fleetsim()


def _socket_from_config(config: Path | None) -> Path:
    path = Path(_config(config, None).control_socket)
    if not path.exists() and FALLBACK_SOCKET.exists():
        return FALLBACK_SOCKET  # the systemd unit's RuntimeDirectory, seen from an operator's shell
    return path


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
