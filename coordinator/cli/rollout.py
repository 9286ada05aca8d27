"""``myoloctl rollout ...``: rolling upgrades of the agent or the trainer, wave by wave, with their gates.

``start`` checks what it can here (the artifact's SHA-256 from the local file when ``--sha256`` is not
given, the plan's waves and durations) and exits 2 naming the option; ``status -w`` follows a rollout until
it ends; ``pause``, ``resume``, ``abort`` (stop and roll back) and ``undo`` (roll back after success) act on one.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer
from rich.console import Console
from rich.text import Text

from myolo.common.digest import sha256_file
from myolo.coordinator.cli import render
from myolo.coordinator.cli.client import ApiClient, ApiOption
from myolo.coordinator.cli.exits import fail
from myolo.coordinator.cli.output import Output, OutputOption, new_console, print_body
from myolo.coordinator.jobs import units
from myolo.coordinator.rollouts.answers import RolloutAnswer
from myolo.coordinator.rollouts.config import Plan
from myolo.coordinator.rollouts.records import Wave

app = typer.Typer(
    help="Rolling upgrades of the agent or the trainer across the fleet: waves of nodes (5 -> 20 -> 50 -> "
    "100 %), each cordoned, drained, upgraded blue-green, health-checked, baked and gated (no FAIL fault, "
    "leak < 0.1 %/h, job throughput within +-3 %), rolled back automatically when a gate fails.",
    no_args_is_help=True,
)
NameArg = Annotated[str, typer.Argument(help="Rollout name, as `myoloctl rollout history` lists it.")]
PHASE_STYLE = {
    "Progressing": "cyan",
    "Paused": "yellow",
    "RollingBack": "bold red",
    "Succeeded": "green",
    "RolledBack": "red",
    "Aborted": "red",
}
STEP_STYLE = {"passed": "green", "failed": "bold red", "baking": "cyan", "upgrading": "cyan", "draining": "cyan"}


def _sha256(artifact: str) -> str:
    path = Path(artifact.removeprefix("file://"))
    if "://" in artifact and not artifact.startswith("file://"):
        fail("--sha256: give the artifact's SHA-256 (it is a URL: it cannot be hashed here)")
    try:
        return sha256_file(path).sha256
    except OSError as exc:
        fail(f"--artifact {artifact}: cannot read it to hash it: {exc.strerror or exc} (or give --sha256)")


@app.command("start")
def start(
    component: Annotated[str, typer.Option("--component", help="What to upgrade: agent or trainer.")],
    version: Annotated[str, typer.Option("--version", help="The release's version (what the agents report).")],
    artifact: Annotated[str, typer.Option("--artifact", help="The wheel: a path on the nodes, file:// or https://.")],
    sha256: Annotated[
        str | None, typer.Option("--sha256", help="Its SHA-256 (default: computed from the local file).")
    ] = None,
    waves: Annotated[
        str | None, typer.Option("--waves", help="Cumulative shares of the nodes, e.g. 5,20,50,100.")
    ] = None,
    bake: Annotated[str | None, typer.Option("--bake", help="Bake time per wave, e.g. 7d, 1h, 90s.")] = None,
    tolerance: Annotated[
        float | None,
        typer.Option("--throughput-tolerance", help="Allowed change of the jobs' per-replica tokens/s (0.03: +-3 %)."),
    ] = None,
    api: ApiOption = None,
) -> None:
    """Start a rollout (admin): the waves are planned over the Ready, uncordoned nodes, idle ones first."""
    plan: Plan | None = None
    try:
        if waves or bake or tolerance is not None:
            given: dict[str, Any] = {}
            if tolerance is not None:
                given["throughput_tolerance"] = tolerance
            if waves:
                given["waves"] = [float(w.strip().rstrip("%")) for w in waves.split(",") if w.strip()]
            if bake:
                given["bake_s"] = units.duration_s(bake)
            plan = msgspec.convert(given, Plan)
    except (ValueError, msgspec.ValidationError) as exc:
        fail(f"--waves/--bake: {exc}")
    digest = sha256 or _sha256(artifact)
    client = ApiClient.from_option(api)
    rec = client.start_rollout(component, version, artifact, digest, plan)
    sizes = "/".join(str(len(w.nodes)) for w in rec.waves)
    new_console().print(f"rollout {rec.name} started: {len(rec.waves)} waves of {sizes} node(s) via {client.last_url}")


def _wave_rows(rec: RolloutAnswer) -> list[list[render.Cell]]:
    rows: list[list[render.Cell]] = []
    for w in rec.waves:
        gates = ", ".join(f"{g.gate} {'ok' if g.passed else 'n/a' if g.passed is None else 'FAILED'}" for g in w.gates)
        rows.append(
            [
                f"{w.index + 1}",
                f"{w.percent:g}%",
                ",".join(w.nodes),
                render.styled(w.step, STEP_STYLE.get(w.step, "")),
                _bake(w),
                gates or "-",
            ]
        )
    return rows


def _bake(w: Wave) -> str:
    if w.step != "baking" or w.bake_until is None:
        return "-"
    return f"{render.age(max(0.0, w.bake_until - time.time()))} left"


def print_rollout(console: Console, rec: RolloutAnswer) -> None:
    console.print(
        Text.assemble(
            f"rollout {rec.name}: {rec.component} {rec.version}  ",
            (rec.phase, PHASE_STYLE.get(rec.phase, "")),
            f"  wave {rec.wave + 1}/{len(rec.waves)}: {rec.reason}",
        )
    )
    render.table(console, ("WAVE", "SHARE", "NODES", "STEP", "BAKE", "GATES"), _wave_rows(rec), indent=2)
    if rec.failed_gate is not None:
        g = rec.failed_gate
        figures = ", ".join(f"{k} {v:g}" for k, v in g.figures.items())
        console.print(f"  failed gate {g.gate}: {g.detail}" + (f" ({figures})" if figures else ""), highlight=False)
    for node, why in sorted(rec.taken_back.items()):
        console.print(f"  {node} took it back: {why}", highlight=False)
    if rec.skipped:
        console.print(f"  not in the plan: {', '.join(f'{n} ({why})' for n, why in rec.skipped.items())}")


@app.command("status")
def status(
    name: Annotated[str | None, typer.Argument(help="A rollout (default: the newest).")] = None,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh until the rollout ends.")] = False,
    interval: Annotated[float, typer.Option("--interval", min=0.2, help="Seconds between refreshes.")] = 2.0,
    output: OutputOption = Output.table,
    api: ApiOption = None,
) -> None:
    """A rollout's phase, its waves (nodes, step, bake time left, gates) and a failed gate's figures."""
    client = ApiClient.from_option(api)
    while True:
        if name is None:
            items = client.rollouts().items
            if not items:
                new_console().print("no rollout yet (myoloctl rollout start --help)")
                return
            rec = items[0]
        else:
            rec = client.rollout(name)
        print_body(rec, output, lambda console, r=rec: print_rollout(console, r))
        if not watch or rec.terminal:
            return
        time.sleep(interval)


@app.command("history")
def history(output: OutputOption = Output.table, api: ApiOption = None) -> None:
    """Every rollout, newest first: what ran where, and how it ended."""
    listed = ApiClient.from_option(api).rollouts()
    recs = listed.items

    def show(console: Console) -> None:
        rows: list[list[render.Cell]] = [
            [
                r.name,
                r.component,
                r.version,
                render.styled(r.phase, PHASE_STYLE.get(r.phase, "")),
                f"{sum(len(w.commands) for w in r.waves)}/{sum(len(w.nodes) for w in r.waves)}",
                r.by,
                r.reason,
            ]
            for r in recs
        ]
        render.table(console, ("NAME", "COMPONENT", "VERSION", "PHASE", "UPGRADED", "BY", "LAST"), rows)

    print_body(listed, output, show)


def _act(action: str, name: str, api: str | None) -> None:
    client = ApiClient.from_option(api)
    rec = client.act(name, action)
    new_console().print(f"rollout {rec.name}: {rec.phase} ({rec.reason}) via {client.last_url}", highlight=False)


@app.command("pause")
def pause(name: NameArg, api: ApiOption = None) -> None:
    """Freeze the rollout where it is (no new step until resume)."""
    _act("pause", name, api)


@app.command("resume")
def resume(name: NameArg, api: ApiOption = None) -> None:
    """Go on from where it was paused."""
    _act("resume", name, api)


@app.command("abort")
def abort(name: NameArg, api: ApiOption = None) -> None:
    """Stop and roll every upgraded node back to the version it ran before (phase Aborted)."""
    _act("abort", name, api)


@app.command("undo")
def undo(name: NameArg, api: ApiOption = None) -> None:
    """Roll every upgraded node back, also after the rollout succeeded (phase RolledBack)."""
    _act("undo", name, api)
