"""``myoloctl metrics``: the metric-name mapping (``map``) and the rewrite of dashboards, alert rules and
queries from dcgm-exporter's names to OpenTelemetry's as Prometheus stores them (``translate``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer
import yaml
from rich.console import Console
from rich.table import Table

from myolo.common.metrics.grafana import MAX_DASHBOARD_BYTES, translate_dashboard
from myolo.common.metrics.mapping import load
from myolo.common.metrics.promql import PromqlError, factor_text, translate
from myolo.coordinator.cli.exits import err_console, fail

app = typer.Typer(
    help="The metric-name mapping between dcgm-exporter / Prometheus names and OpenTelemetry's, and the rewrite "
    "of PromQL, Grafana dashboards and Prometheus rule files from one to the other.",
    no_args_is_help=True,
)


@app.command("map")
def show_map(
    fmt: Annotated[
        Literal["table", "toml", "json"],
        typer.Option("--format", help="table: one row a metric; toml: the shipped file as it is; json: parsed."),
    ] = "table",
    component: Annotated[
        Literal["all", "agent", "coordinator"], typer.Option(help="Only the metrics of this component.")
    ] = "all",
) -> None:
    """Print the mapping every exporter reads: each metric's name on /metrics (dcgm-exporter's DCGM_* or
    ours), its unit, and the OpenTelemetry name, unit and attributes it is exported under over OTLP, with the
    name Prometheus stores that under and the factor between the two values."""
    from importlib import resources

    mapping = load()
    if fmt == "toml":
        sys.stdout.write(resources.files("myolo.common.metrics").joinpath("mapping.toml").read_text(encoding="utf-8"))
        return
    metrics = [m for m in mapping.metric if component in ("all", m.component)]
    if fmt == "json":
        import msgspec

        sys.stdout.write(msgspec.json.encode({"labels": mapping.labels, "metric": metrics}).decode() + "\n")
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("METRIC", "TYPE", "UNIT", "DCGM", "OTEL", "OTEL UNIT", "ATTRIBUTES", "STORED AS", "VALUE"):
        table.add_column(col, overflow="fold")
    for m in metrics:
        attrs = ",".join(f"{k}={v}" for k, v in sorted(m.otel.attributes.items()))
        scale = m.otel_scale
        value = "same" if scale == 1 else f"stored{factor_text(1 / scale)}"
        table.add_row(
            m.name, m.type, m.unit, m.dcgm or "-", m.otel.name, m.otel.unit, attrs or "-", m.otel_prometheus_name, value
        )
    Console(width=240, soft_wrap=True).print(table)
    labels = ", ".join(f"{k} -> {v}" for k, v in mapping.labels.items())
    Console(width=240, soft_wrap=False).print(f"\nlabels: {labels}")


@app.command("translate")
def translate_cmd(
    expr: Annotated[
        str | None, typer.Argument(help="A PromQL expression, e.g. 'avg by (gpu) (DCGM_FI_DEV_GPU_UTIL)'.")
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file",
            "-f",
            help="A Grafana dashboard (.json) or a Prometheus rule file (.yml/.yaml) to rewrite; - reads stdin "
            "(as a dashboard).",
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the result here instead of stdout.")
    ] = None,
) -> None:
    """Rewrite from the names on /metrics to the OpenTelemetry names as Prometheus stores them: metric names,
    label matchers, grouping labels, the attributes that tell series apart, the unit (a factor where the units
    differ) and Grafana's legend templates. What it cannot rewrite safely is printed on stderr as a note."""
    if (expr is None) == (file is None):
        fail("give either an expression or --file, not both and not neither")
    notes: list[str]
    if expr is not None:
        try:
            t = translate(expr)
        except PromqlError as exc:
            fail(f"expression: {exc}")
        result, notes = t.text + "\n", t.notes
    else:
        assert file is not None
        text = _read(file)
        if file.suffix.lower() in (".yml", ".yaml"):
            result, notes = _rules(text, file)
        else:
            try:
                d = translate_dashboard(text)
            except ValueError as exc:
                fail(f"--file {file}: {exc}")
            result, notes = json.dumps(d.dashboard, indent=2) + "\n", d.notes
            err_console.print(f"{d.rewritten} queries rewritten", highlight=False)
    for note in notes:
        err_console.print(f"[yellow]note:[/] {note}", markup=True, highlight=False)
    if output is None:
        sys.stdout.write(result)
    else:
        output.write_text(result)


def _read(file: Path) -> str:
    if str(file) == "-":
        text = sys.stdin.read(MAX_DASHBOARD_BYTES + 1)
    else:
        try:
            if file.stat().st_size > MAX_DASHBOARD_BYTES:
                fail(f"--file {file}: over {MAX_DASHBOARD_BYTES} bytes")
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"--file {file}: cannot read it: {exc}")
    if len(text) > MAX_DASHBOARD_BYTES:
        fail(f"--file {file}: over {MAX_DASHBOARD_BYTES} bytes")
    return text


def _rules(text: str, file: Path) -> tuple[str, list[str]]:
    """A Prometheus rule file: every ``groups[].rules[].expr`` rewritten."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        fail(f"--file {file}: not YAML: {exc}")
    if not isinstance(doc, dict) or not isinstance(doc.get("groups"), list):
        fail(f"--file {file}: a rule file has a top-level 'groups' list")
    notes: list[str] = []
    for gi, group in enumerate(doc["groups"]):
        for ri, rule in enumerate((group or {}).get("rules") or []):
            if isinstance(rule, dict) and isinstance(rule.get("expr"), str):
                where = f"groups[{gi}].rules[{ri}].expr"
                try:
                    t = translate(rule["expr"])
                except PromqlError as exc:
                    notes.append(f"{where}: left as it was: {exc}")
                    continue
                rule["expr"] = t.text
                notes += [f"{where}: {n}" for n in t.notes]
    return yaml.safe_dump(doc, sort_keys=False, width=120), notes
