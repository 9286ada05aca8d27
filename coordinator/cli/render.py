"""Tables and detail views for ``myoloctl``: coloured rich tables on a terminal, plain columns when piped.

Piped output is plain text in aligned columns (no colour, no box lines, never wrapped), so ``grep``, ``awk``
and ``watch`` read it like ``kubectl get``. On a terminal the same rows become a rich table with health and
liveness coloured, so a failed or lost node stands out at a glance.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import msgspec
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from myolo.coordinator.jobs.answers import JobAnswer

STYLES = {
    "ok": "green",
    "warn": "yellow",
    "fail": "bold red",
    "Ready": "green",
    "Suspect": "yellow",
    "Lost": "bold red",
    "Cordoned": "magenta",
    "yes": "magenta",
    "no": "",
    "Pending": "yellow",
    "Running": "green",
    "Resizing": "cyan",
    "Succeeded": "blue",
    "Failed": "bold red",
    "Deleting": "magenta",
}

Cell = str | Text
GIB = 1 << 30


def styled(value: str, style: str | None = None) -> Text:
    """A cell coloured by its own word (ok/warn/fail, Ready/Suspect/Lost) unless a style is given."""
    return Text(value, style=style if style is not None else STYLES.get(value, ""))


def table(console: Console, columns: Sequence[str], rows: Sequence[Sequence[Cell]], *, indent: int = 0) -> None:
    """Print rows under a header: rich on a terminal, plain aligned columns otherwise."""
    if console.is_terminal:
        grid = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, header_style="bold")
        for i, name in enumerate(columns):  # names and states stay whole; the rest wraps on a narrow terminal
            grid.add_column(name, overflow="fold", no_wrap=i < 3)
        for row in rows:
            grid.add_row(*row)
        console.print(grid if not indent else _indented(grid, indent))
        return
    for line in plain_lines(columns, rows):
        console.out(" " * indent + line, highlight=False)


def _indented(grid: Table, indent: int) -> Table:
    from rich.padding import Padding

    return Padding(grid, (0, 0, 0, indent))  # type: ignore[return-value]


def plain_lines(columns: Sequence[str], rows: Sequence[Sequence[Cell]]) -> list[str]:
    """kubectl-style columns: upper-case header, widths from the widest cell, three spaces between."""
    cells = [[str(c) for c in columns]] + [[c.plain if isinstance(c, Text) else c for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    return ["   ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]


# -- value formatting ---------------------------------------------------------------------------------------
def age(seconds: float | None) -> str:
    """0.4s, 12s, 3m10s, 2h5m, 3d: precise when fresh, short when old."""
    if seconds is None:
        return "never"
    if seconds < 10:
        return f"{seconds:.1f}s"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s" if s < 600 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60}m"
    return f"{s // 86400}d"


def num(value: float | None, unit: str = "", digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}{unit}"


def memory(used: int | None, total: int | None) -> str:
    if used is None or total is None:
        return "-"
    return f"{used / GIB:.1f}/{total / GIB:.0f}GiB"


def reasons(items: Sequence[str], limit: int = 60) -> str:
    text = "; ".join(items)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- views --------------------------------------------------------------------------------------------------
def node_status(node: dict[str, Any]) -> Text:
    """Ready / Suspect / Lost, with ``,Cordoned`` appended (like kubectl's SchedulingDisabled)."""
    text = Text()
    text.append(node["liveness"], style=STYLES.get(node["liveness"], ""))
    if node.get("cordoned"):
        text.append(",")
        text.append("Cordoned", style=STYLES["Cordoned"])
    return text


NODE_COLUMNS = ("NAME", "STATUS", "HEALTH", "GPUS", "LAST SEEN", "BACKEND", "AGENT", "REASONS")


def nodes_rows(items: list[dict[str, Any]]) -> list[list[Cell]]:
    rows: list[list[Cell]] = []
    for n in items:
        bad = sum(1 for g in n.get("gpus", []) if g.get("health") != "ok")
        gpus = f"{n.get('gpu_count', len(n.get('gpus', [])))}" + (f" ({bad} bad)" if bad else "")
        why = list(n.get("health_reasons", []))
        if n.get("cordoned") and n.get("cordon"):
            why.append(f"cordoned: {n['cordon']['reason']}")
        rows.append(
            [
                n["node_id"],
                node_status(n),
                styled(n["health"]),
                gpus,
                age(n.get("last_seen_age_s")),
                n.get("backend") or "-",
                n.get("agent_version") or "-",
                reasons(why),
            ]
        )
    return rows


GPU_COLUMNS = ("NODE", "GPU", "NAME", "UTIL", "MEMORY", "TEMP", "POWER", "HEALTH", "REASONS")


def gpu_cells(g: dict[str, Any], reasons_limit: int = 60) -> list[Cell]:
    """GPU, NAME, UTIL, MEMORY, TEMP, POWER, HEALTH, REASONS of one GPU row (``get gpus``, ``describe node``)."""
    return [
        str(g["index"]),
        g.get("name", "-"),
        num(g.get("util_gpu"), "%"),
        memory(g.get("mem_used_bytes"), g.get("mem_total_bytes")),
        num(g.get("temp_gpu_c"), "C"),
        num(g.get("power_w"), "W"),
        styled(g.get("health", "ok")),
        reasons(g.get("health_reasons", []), reasons_limit),
    ]


def gpus_rows(items: list[dict[str, Any]]) -> list[list[Cell]]:
    return [[g["node_id"], *gpu_cells(g)] for g in items]


def print_nodes(console: Console, body: dict[str, Any]) -> None:
    if not body["items"]:
        console.print("No nodes yet (agents publish a sample every second once they run).")
        return
    table(console, NODE_COLUMNS, nodes_rows(body["items"]))


def print_gpus(console: Console, body: dict[str, Any]) -> None:
    if not body["items"]:
        console.print("No GPUs yet.")
        return
    table(console, GPU_COLUMNS, gpus_rows(body["items"]))


def since(now: float | None, then: float | None) -> str:
    return age(None if then is None else max(0.0, (now if now is not None else time.time()) - then))


# -- jobs ---------------------------------------------------------------------------------------------------
JOB_COLUMNS = ("NAME", "PHASE", "REPLICAS", "GEN", "STEP", "LOSS", "TOKENS/S", "AGE", "REASON")


class UnreadableJob(ValueError):
    """The coordinator answered a job this myoloctl cannot read (a newer coordinator, or not a coordinator)."""


def job_records(items: list[dict[str, Any]]) -> list[JobAnswer]:
    """The API's job JSON as records (the trainer's defaults, left out of the JSON, filled back in)."""
    try:
        return [msgspec.convert(item, JobAnswer) for item in items]
    except msgspec.ValidationError as exc:
        raise UnreadableJob(f"cannot read the job in the answer: {exc} (is myoloctl older than the API?)") from None


def job_phase(job: JobAnswer) -> Text:
    """The phase, with ``,Deleting`` appended while its workers stop for a delete."""
    text = Text()
    text.append(job.phase, style=STYLES.get(job.phase, ""))
    if job.deleting:
        text.append(",")
        text.append("Deleting", style=STYLES["Deleting"])
    return text


def job_replicas(job: JobAnswer) -> str:
    """Replicas now / the bounds: ``2/1-3``."""
    now = job.generation.replicas if job.generation else 0
    return f"{now}/{job.spec.min_replicas}-{job.spec.max_replicas}"


def jobs_rows(jobs: list[JobAnswer]) -> list[list[Cell]]:
    return [
        [
            j.name,
            job_phase(j),
            job_replicas(j),
            str(j.generation.number) if j.generation else "-",
            f"{j.progress.step}/{j.spec.trainer.optimizer.steps}",
            num(j.progress.loss, digits=4),
            num(j.progress.tokens_per_s),
            since(None, j.created),
            reasons([j.reason] if j.reason else []),
        ]
        for j in jobs
    ]


def print_jobs(console: Console, body: dict[str, Any]) -> None:
    """``GET /v1/jobs``'s answer, or one job's (``get job NAME``)."""
    items = body.get("items", [body])
    if not items:
        console.print("No jobs yet (`myoloctl apply -f job.yaml` creates one).")
        return
    try:
        jobs = job_records(items)
    except UnreadableJob as exc:
        console.print(Text(str(exc), style="red"))
        return
    table(console, JOB_COLUMNS, jobs_rows(jobs))
