"""``myoloctl drift ...``: production-data drift per model — its statistics, references and rule.

``status`` reads (any coordinator); ``baseline set`` builds each column's reference here from a Parquet, CSV
or JSON Lines file with the coordinator's own builder (so the file never travels, only a bounded summary)
and sends them one feature at a time; ``rule set`` changes the options given and keeps the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer
from rich.console import Console
from rich.text import Text

from myolo.coordinator.cli import render
from myolo.coordinator.cli.client import ApiClient, ApiOption
from myolo.coordinator.cli.drift_compare import compare
from myolo.coordinator.cli.exits import fail
from myolo.coordinator.cli.output import Output, OutputOption, new_console, print_body
from myolo.coordinator.drift.interface import DriftView
from myolo.coordinator.drift.offline.baseline import references_from_file
from myolo.coordinator.drift.offline.files import DataFileError
from myolo.coordinator.drift.records import StatusRecord
from myolo.coordinator.drift.reference import DEFAULT_MAX_VALUES
from myolo.coordinator.drift.rule import DriftRule
from myolo.coordinator.jobs import units
from myolo.events.payloads.models import FeatureDrift

app = typer.Typer(
    help="Drift of production data: each watched model version's statistics per feature (PSI, KS, "
    "Wasserstein, chi-square, Jensen-Shannon), its references and the rule that triggers retraining.",
    no_args_is_help=True,
)
baseline_app = typer.Typer(help="Set a model version's reference distributions.", no_args_is_help=True)
rule_app = typer.Typer(help="Show or change when a model counts as drifted.", no_args_is_help=True)
app.add_typer(baseline_app, name="baseline")
app.add_typer(rule_app, name="rule")

ModelArg = Annotated[str, typer.Argument(help="Model name, as the serving side names it in its drift samples.")]


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}" if abs(value) < 1e-3 and value else f"{value:.{digits}f}"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.2e}" if value < 1e-3 else f"{value:.3f}"


def _state(drifted: bool, consecutive: int) -> Text:
    if drifted:
        return Text(f"DRIFT x{consecutive}", style="bold red")
    return Text("stable", style="green")


def _fired(f: FeatureDrift, test: str, text: str) -> Text:
    return Text(text, style="bold red" if test in f.by else "")


def feature_rows(features: list[FeatureDrift]) -> list[list[render.Cell]]:
    return [
        [
            f.feature,
            f.kind,
            str(f.count),
            _fired(f, "psi", _num(f.psi)),
            _fired(f, "ks", _num(f.ks)),
            _fired(f, "ks", _p(f.ks_p)),
            _fired(f, "wasserstein", _num(f.wasserstein)),
            _fired(f, "chi2", _num(f.chi2, 1)),
            _fired(f, "chi2", _p(f.chi2_p)),
            _fired(f, "js", _num(f.js)),
            Text("drifted", style="bold red") if f.drifted else Text("ok", style="green"),
        ]
        for f in features
    ]


FEATURE_COLUMNS = ("FEATURE", "KIND", "N", "PSI", "KS", "KS P", "W1/STD", "CHI2", "CHI2 P", "JS", "STATE")


def _print_summary(console: Console, items: list[StatusRecord]) -> None:
    if not items:
        console.print("no model is watched yet: drift samples go to myolo.drift.samples")
        return
    rows: list[list[render.Cell]] = [
        [
            s.model,
            s.version,
            f"{s.share:.2f}",
            str(sum(f.drifted for f in s.features)) + f"/{len(s.features)}",
            _state(s.drifted, s.consecutive),
            str(len(s.detections)),
            s.detections[-1] if s.detections else "-",
        ]
        for s in items
    ]
    render.table(console, ("MODEL", "VERSION", "SHARE", "DRIFTED", "STATE", "DETECTIONS", "LAST"), rows)


def _print_view(console: Console, v: DriftView) -> None:
    r = v.rule
    console.print(
        f"model {v.model}: rule ({v.rule_source}) numeric {'/'.join(r.numeric_tests)}, categorical "
        f"{'/'.join(r.categorical_tests)}, alpha {r.alpha} ({r.correction}), drift when >= {r.share_threshold:.0%} "
        f"of features drift {r.consecutive}x in a row; window {render.age(r.window_s)}, every {render.age(r.every_s)}",
        highlight=False,
    )
    for s in v.versions:
        console.print(
            Text.assemble(
                f"\nversion {s.version}: ",
                _state(s.drifted, s.consecutive),
                f"  share {s.share:.2f}, window of {render.age(s.window_end - s.window_start)}"
                + (f", detections: {', '.join(s.detections[-3:])}" if s.detections else ""),
            )
        )
        render.table(console, FEATURE_COLUMNS, feature_rows(s.features), indent=2)
        if s.missing:
            console.print(f"  no reference yet for: {', '.join(s.missing)}", highlight=False)
    for learning in v.learning:
        console.print(
            f"version {learning.version}: learning references from the first {learning.target} values of "
            f"{', '.join(learning.features)}",
            highlight=False,
        )
    if v.references:
        by_version: dict[str, list[str]] = {}
        for ref in v.references:
            by_version.setdefault(ref.version, []).append(f"{ref.feature} ({ref.source}, n={ref.count})")
        for version, refs in by_version.items():
            console.print(f"references of version {version}: {', '.join(refs)}", highlight=False)
    if v.retrain is not None:
        run = v.retrain
        registered = f" -> version {run.registered}" if run.registered is not None else ""
        reason = f": {run.reason}" if run.reason else ""
        console.print(
            f"retraining: job {run.job} for {run.detection_id} is {run.state}{registered}{reason}", highlight=False
        )


@app.command("status")
def status(
    model: Annotated[str | None, typer.Argument(help="A model: its features' statistics per version.")] = None,
    output: OutputOption = Output.table,
    api: ApiOption = None,
) -> None:
    """Every watched model's drift, or one model's statistics per feature (fired tests in red)."""
    if model is None:
        listed = ApiClient.from_option(api).drift_summary()
        print_body(listed, output, lambda console: _print_summary(console, listed.items))
        return
    view = ApiClient.from_option(api).drift(model)
    print_body(view, output, lambda console: _print_view(console, view))


@baseline_app.command("set")
def baseline_set(
    model: ModelArg,
    source: Annotated[
        Path, typer.Option("--from", help="Reference data: a .parquet, .csv or .jsonl file, one column per feature.")
    ],
    version: Annotated[
        str | None, typer.Option("--version", help="The model version (default: the registry's champion).")
    ] = None,
    features: Annotated[
        str | None, typer.Option("--features", help="Comma-separated columns to use (default: every column).")
    ] = None,
    max_values: Annotated[
        int, typer.Option("--max-values", min=10, max=2000, help="Values a numeric reference keeps (quantiles).")
    ] = DEFAULT_MAX_VALUES,
    api: ApiOption = None,
) -> None:
    """Set the reference of every column of a file (numeric columns by their values, others by category)."""
    try:
        built = references_from_file(
            source, [f.strip() for f in features.split(",") if f.strip()] if features else None, max_values
        )
    except (DataFileError, ValueError) as exc:
        fail(str(exc))
    refs = built.by_name()
    console = new_console()
    client = ApiClient.from_option(api)
    for name, (kind, ref) in refs.items():
        answer = client.set_reference(model, name, {"version": version, "source": f"file:{source.name}", kind: ref})
        console.print(f"{model} version {answer.version}: {name} ({kind}, {built.rows} rows) set", highlight=False)
    console.print(f"references of {len(refs)} feature(s) recorded via {client.last_url or '-'}", highlight=False)


@rule_app.command("show")
def rule_show(model: ModelArg, output: OutputOption = Output.yaml, api: ApiOption = None) -> None:
    """The rule in force for the model (its own, or the [drift.rule] default)."""
    view = ApiClient.from_option(api).drift(model)
    shown = {"rule_source": view.rule_source, "rule": view.rule}
    print_body(shown, Output.json if output is Output.json else Output.yaml, lambda _: None)


@rule_app.command("set")
def rule_set(
    model: ModelArg,
    share: Annotated[
        float | None, typer.Option("--share", help="Share of drifted features that makes the model drift.")
    ] = None,
    consecutive: Annotated[
        int | None, typer.Option("--consecutive", help="Drifted evaluations in a row to detect.")
    ] = None,
    alpha: Annotated[float | None, typer.Option("--alpha", help="Significance of the p-value tests.")] = None,
    correction: Annotated[str | None, typer.Option("--correction", help="bonferroni, fdr_bh or none.")] = None,
    numeric: Annotated[
        str | None, typer.Option("--numeric", help="Deciding tests for numeric features: ks,wasserstein,psi.")
    ] = None,
    categorical: Annotated[
        str | None, typer.Option("--categorical", help="Deciding tests for categorical features: chi2,js.")
    ] = None,
    window: Annotated[str | None, typer.Option("--window", help="Window length, e.g. 1h, 10m, 90s.")] = None,
    every: Annotated[str | None, typer.Option("--every", help="Evaluation period, e.g. 10m.")] = None,
    min_count: Annotated[int | None, typer.Option("--min-count", help="Values a window needs to be judged.")] = None,
    reference_count: Annotated[
        int | None, typer.Option("--reference-count", help="Values a learned reference is built from.")
    ] = None,
    api: ApiOption = None,
) -> None:
    """Change the model's rule: the options given replace the rule in force, the others stay."""
    changes: dict[str, Any] = {}
    try:
        for key, value in (
            ("share_threshold", share),
            ("consecutive", consecutive),
            ("alpha", alpha),
            ("correction", correction),
            ("min_count", min_count),
            ("reference_count", reference_count),
        ):
            if value is not None:
                changes[key] = value
        if numeric:
            changes["numeric_tests"] = [t.strip() for t in numeric.split(",") if t.strip()]
        if categorical:
            changes["categorical_tests"] = [t.strip() for t in categorical.split(",") if t.strip()]
        if window:
            changes["window_s"] = units.duration_s(window)
        if every:
            changes["every_s"] = units.duration_s(every)
    except ValueError as exc:
        fail(f"--window/--every: {exc}")
    if not changes:
        fail("give at least one option to change (myoloctl drift rule set --help lists them)")
    client = ApiClient.from_option(api)
    merged = {**msgspec.to_builtins(client.drift(model).rule), **changes}
    try:
        rule = msgspec.convert(merged, DriftRule)
    except (msgspec.ValidationError, ValueError) as exc:
        fail(f"the rule is not valid: {exc}")
    client.set_rule(model, rule)
    new_console().print(
        f"drift rule of {model} set ({', '.join(sorted(changes))}) via {client.last_url}", highlight=False
    )


@rule_app.command("reset")
def rule_reset(model: ModelArg, api: ApiOption = None) -> None:
    """Back to the [drift.rule] default of the coordinators."""
    client = ApiClient.from_option(api)
    client.reset_rule(model)
    new_console().print(f"{model} follows the default drift rule via {client.last_url}", highlight=False)


app.command("compare")(compare)
