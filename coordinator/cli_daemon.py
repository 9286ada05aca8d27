"""``myolo-coordinator``: the control-plane daemon (``run`` is what systemd starts)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import typer

from myolo.common.errors import ConfigError
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.config import load_coordinator_config
from myolo.coordinator.core.config import CoreConfig

DEFAULT_CONFIG = Path("/etc/myolo/coordinator.toml")

app = typer.Typer(
    name="myolo-coordinator",
    help="Myolotrain coordinator: fleet view, fault reactions, commands to agents, leader election, HTTP API.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _main() -> None:
    """(keeps `run` and `components` sub-commands)"""


def _config(path: Path | None, api_port: int | None) -> CoreConfig:
    if path is None and DEFAULT_CONFIG.exists():
        path = DEFAULT_CONFIG
    try:
        return load_coordinator_config(path, components=COMPONENTS, api_port=api_port)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


@app.command()
def run(
    config: Path | None = typer.Option(
        None,
        "--config",
        "-c",
        help="Config file (TOML). Default: /etc/myolo/coordinator.toml when it exists. "
        "MYOLO_* environment variables override it (fleet.lost_after_s -> MYOLO_FLEET_LOST_AFTER_S).",
    ),
    api_port: int | None = typer.Option(None, "--api-port", help="Port of the HTTP API (overrides api.port)."),
    log_json: bool | None = typer.Option(None, "--log-json/--log-text", help="Default: JSON unless a terminal."),
) -> None:
    """Run a coordinator. Several may run: one leads (Kafka group membership), the others stand by and serve
    reads. SIGTERM or SIGINT stops it gracefully (a standby takes over at once)."""
    from myolo.common import memtrim
    from myolo.common.logs import configure_logging
    from myolo.common.memtrace import start_from_env
    from myolo.events.topics import ensure_topics

    cfg = _config(config, api_port)
    configure_logging(cfg.log_level, json=log_json)

    async def main() -> int:
        from myolo.coordinator.core.coordinator import Coordinator, topic_specs

        try:
            start_from_env("coordinator")
            memtrim.start("coordinator")
            await ensure_topics(cfg.kafka.client_kwargs(), topic_specs(COMPONENTS))
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            return 2
        service = Coordinator(cfg, COMPONENTS)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, service.request_stop)
        await service.run()
        return 0

    raise typer.Exit(asyncio.run(main()))


@app.command()
def components(
    as_json: bool = typer.Option(False, "--json", help="One JSON document instead of text."),
) -> None:
    """Print each component of this coordinator, in the order it is built: the event types it consumes, the
    state topics (and record kinds) it owns, what it needs and from whom, what it provides, the routes it
    serves. Read from the declarations alone: nothing is started, no config is read."""
    import msgspec

    from myolo.coordinator.describe import describe, render

    infos = describe(COMPONENTS)
    typer.echo(msgspec.json.encode(infos).decode() if as_json else render(infos))


if __name__ == "__main__":
    app()
