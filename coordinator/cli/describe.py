"""``myoloctl describe node NAME``: one node in full, for a person deciding what to do about it.

GPUs with their health and reasons, the recent faults, what NCCL communicators on the node look like, the
memory-leak trend of each tracked series, the cordon and why. Readable piped (plain) or on a terminal.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from coordinator.cli import render
from coordinator.cli.client import ApiClient, ApiError, ApiOption
from coordinator.cli.common import fail
from coordinator.cli.render import Cell, age, reasons, styled

app = typer.Typer(help="Show one object of the fleet in full.", no_args_is_help=True)


@app.command("node")
def describe_node(
    name: Annotated[str, typer.Argument(help="Node id, as `myoloctl get nodes` lists it.")],
    api: ApiOption = None,
) -> None:
    """GPUs, health and reasons, recent faults, NCCL facts, leak trend and cordon of one node."""
    try:
        node = ApiClient.from_option(api).get(f"/v1/nodes/{name}")
    except ApiError as exc:
        fail(exc.render(), code=2 if exc.status in (400, 404) or exc.status == 2 else 1)
    print_node(Console(soft_wrap=True, highlight=False), node)


def _now(node: dict[str, Any]) -> float:
    """The coordinator's clock at the time of the answer (ages must be on its clock, not ours)."""
    if node.get("last_seen") is not None and node.get("last_seen_age_s") is not None:
        return node["last_seen"] + node["last_seen_age_s"]
    return time.time()


def _field(console: Console, key: str, value: Cell) -> None:
    line = Text(f"{key + ':':<14}")
    line.append(value if isinstance(value, Text) else Text(value))
    console.print(line)


def _section(console: Console, title: str) -> None:
    console.print()
    console.print(Text(title, style="bold"))


def print_node(console: Console, node: dict[str, Any]) -> None:
    now = _now(node)
    _field(console, "Name", node["node_id"])
    seen = f"last sample {age(node.get('last_seen_age_s'))} ago, seq {node.get('last_seq')}, every {node.get('sample_interval_s')}s"
    _field(console, "Status", render.node_status(node).append(f"  ({seen})"))
    _field(console, "Health", styled(node["health"]))
    for why in node.get("health_reasons", []):
        console.print(Text(" " * 14 + why))
    cordon = node.get("cordon")
    if cordon:
        state = "cordoned" if cordon["cordoned"] else "uncordoned"
        text = f"{state} {render.since(now, cordon['time'])} ago by {cordon['by']} (epoch {cordon.get('epoch', 0)}): {cordon['reason']}"
        _field(console, "Cordon", styled(text, "magenta" if cordon["cordoned"] else ""))
    else:
        _field(console, "Cordon", "not cordoned")
    _field(console, "Schedulable", "yes" if node.get("schedulable") else styled("no", "yellow"))
    backend = node.get("backend") or "-"
    _field(console, "Backend", backend + (" (simulated GPUs)" if backend == "sim" else ""))
    _field(console, "Agent", f"{node.get('agent_version') or '-'}   driver {node.get('driver_version') or '-'}")

    _section(console, f"GPUs ({len(node.get('gpus', []))}):")
    render.table(
        console,
        ("GPU", "NAME", "UTIL", "MEMORY", "TEMP", "POWER", "HEALTH", "REASONS"),
        [render.gpu_cells(g, reasons_limit=80) for g in node.get("gpus", [])],
        indent=2,
    )

    _section(console, "Recent faults (newest last):")
    faults = node.get("recent_faults", [])
    if faults:
        render.table(
            console,
            ("AGE", "KIND", "HEALTH", "GPU", "XID", "REASONS"),
            [
                [
                    render.since(now, f["time"]),
                    f["kind"],
                    styled(f["health"]),
                    _opt(f.get("gpu_index")),
                    _opt(f.get("xid")),
                    reasons(f.get("reasons") or ([f["message"]] if f.get("message") else []), 80),
                ]
                for f in faults
            ],
            indent=2,
        )
    else:
        console.print("  none")

    _section(console, "NCCL communicators:")
    nccl = node.get("nccl", [])
    if nccl:
        render.table(
            console,
            ("PID", "RANK", "NODES", "VERSION", "NETWORK", "TRANSPORTS", "INIT", "WARNINGS"),
            [
                [
                    str(c["pid"]),
                    f"{_opt(c.get('rank'))}/{_opt(c.get('nranks'))}",
                    _opt(c.get("nnodes")),
                    c.get("version") or "-",
                    c.get("network") or "-",
                    ",".join(c.get("transports", [])) or "-",
                    "done" if c.get("init_complete") else styled("pending", "yellow"),
                    styled(reasons(c.get("warnings", [])), "yellow") if c.get("warnings") else "-",
                ]
                for c in nccl
            ],
            indent=2,
        )
    else:
        console.print("  none reported (no NCCL job has run here yet)")

    _section(console, "Memory leak trend (Theil-Sen slope, % of capacity per hour):")
    leaks = node.get("leaks", [])
    if leaks:
        render.table(
            console,
            ("SERIES", "SLOPE", "RANGE", "WINDOW", "SAMPLES", "ALERT"),
            [
                [
                    _series(s),
                    f"{s['slope_pct_per_h']:+.3f}%/h",
                    f"{s['lower_pct_per_h']:+.3f}..{s['upper_pct_per_h']:+.3f}",
                    age(s.get("window_s")),
                    str(s.get("samples", "-")),
                    styled("LEAK", "bold red") if s.get("alert") else "no",
                ]
                for s in leaks
            ],
            indent=2,
        )
    else:
        console.print("  no series reported yet")

    flags = node.get("flags", [])
    if flags:
        _section(console, "Rejected records (implausible, newest last):")
        for flag in flags:
            console.print(Text(f"  {flag}", style="yellow"))


def _opt(value: Any) -> str:
    return "-" if value is None else str(value)


def _series(leak: dict[str, Any]) -> str:
    subject = leak.get("subject", "?")
    if subject == "gpu":
        return f"gpu {leak.get('gpu_index')}"
    if subject == "process_gpu":
        return f"pid {leak.get('pid')} on gpu {leak.get('gpu_index')}"
    return f"pid {leak.get('pid')} host RSS"
