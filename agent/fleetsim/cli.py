"""``myolo-agent fleetsim``: run a simulated fleet against a Kafka cluster and report what it cost.

``fleetsim()`` is the plain function (benchmarks and other CLIs call it); ``app`` is a standalone typer app
whose one command the agent's CLI mounts as ``myolo-agent fleetsim``.
"""

from __future__ import annotations

import asyncio
import json

import typer

from myolo.common.clock import SystemClock
from myolo.events.settings import KafkaSettings


async def run_fleet(
    nodes: int,
    gpus: int,
    duration: float,
    fault_rate: float,
    bootstrap: str | None,
    rate_hz: float = 1.0,
    seed: int = 0,
    report_every_s: float = 10.0,
) -> dict:
    """Start a simulator, publish for ``duration`` seconds, print progress, return the final stats."""
    from myolo.agent.fleetsim.simulator import FleetSimulator
    from myolo.events.topics import ensure_topics

    settings = KafkaSettings(bootstrap=bootstrap or "", client_id="myolo-fleetsim")
    await ensure_topics(settings.client_kwargs())
    sim = FleetSimulator(settings, nodes, gpus, rate_hz, fault_rate, SystemClock(), seed=seed)
    await sim.start()
    task = asyncio.create_task(sim.run(duration))
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=report_every_s)
            s = sim.stats
            typer.echo(
                f"fleetsim: {s.samples_sent} samples, {s.faults_sent} faults, {s.send_errors} send errors, "
                f"{s.late_slots} late slots",
                err=True,
            )
        await task
    finally:
        if not task.done():
            task.cancel()
        await sim.stop()
    return {"nodes": nodes, "gpus": gpus, "rate_hz": rate_hz, "duration_s": duration, **sim.stats.as_dict()}


def fleetsim(
    nodes: int = 2000, gpus: int = 8, duration: float = 60.0, fault_rate: float = 0.0, bootstrap: str | None = None
) -> dict:
    """Run a fleet for ``duration`` seconds (blocking); the stats as a dict."""
    return asyncio.run(run_fleet(nodes, gpus, duration, fault_rate, bootstrap))


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command("fleetsim")
def fleetsim_command(
    nodes: int = typer.Option(2000, "--nodes", "-n", min=1, help="Simulated nodes (agents)."),
    gpus: int = typer.Option(8, "--gpus", "-g", min=1, max=64, help="Simulated GPUs per node."),
    duration: float = typer.Option(60.0, "--duration", "-d", min=0.1, help="Seconds to publish for."),
    fault_rate: float = typer.Option(
        0.0, "--fault-rate", min=0.0, help="Random XID faults per second across the whole fleet (0: none)."
    ),
    rate_hz: float = typer.Option(1.0, "--rate", min=0.01, max=100.0, help="Samples per second per node."),
    seed: int = typer.Option(0, "--seed", help="Seed of the simulated physics and faults (runs repeat)."),
    bootstrap: str | None = typer.Option(
        None,
        "--bootstrap",
        "-b",
        envvar="MYOLO_KAFKA_BOOTSTRAP",
        help="Kafka bootstrap address [default: the local stack started by `myoloctl local up`].",
    ),
) -> None:
    """Play NODES agents with GPUS simulated GPUs each, publishing NodeSamples at RATE Hz (spread evenly over
    each second) and random XID faults, to Kafka. Prints the simulator's own cost as JSON at the end."""
    from myolo.common.errors import ConfigError

    try:
        stats = asyncio.run(run_fleet(nodes, gpus, duration, fault_rate, bootstrap, rate_hz, seed))
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(json.dumps(stats, indent=2))
    if stats["send_errors"]:
        raise typer.Exit(1)


if __name__ == "__main__":
    app()
