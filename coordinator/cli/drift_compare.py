"""``myoloctl drift compare A B``: how the feature distributions of two files differ, by the drift component's
own statistics and rule, with the largest difference where their rows line up.

A is the reference, B the data compared with it. Both are read in chunks (Parquet by row group, CSV and JSON
Lines line by line), so files larger than memory compare in bounded memory; the statistics are computed on a
uniform sample of each numeric column (``--sample`` values), categories on every value. The verdict is the
model's rule (``--model``: the rule in force on the coordinators for it), a rule file (``--rule``), or the
default rule. Exit codes: 0 no drift, 1 drift, 2 bad input (a file that does not read, a column that is not
there, a rule that does not parse).
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import msgspec
import typer
from rich.table import Table

from myolo.coordinator.cli.client import ApiClient, ApiOption
from myolo.coordinator.cli.exits import fail
from myolo.coordinator.cli.output import new_console
from myolo.coordinator.drift.offline.compare import Comparison, compare_files, load_rule
from myolo.coordinator.drift.offline.files import DataFileError
from myolo.coordinator.drift.offline.sketch import DEFAULT_SAMPLE
from myolo.coordinator.drift.rule import DriftRule

EXIT_SAME, EXIT_DRIFT, EXIT_BAD_INPUT = 0, 1, 2


class Format(enum.StrEnum):
    table = "table"
    json = "json"


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if value and abs(value) < 1e-3 else f"{value:.3f}"


def print_comparison(c: Comparison) -> None:
    console = new_console()
    table = Table(box=None, header_style="bold")
    for col in ("FEATURE", "KIND", "ROWS A/B", "PSI", "KS (p)", "W1/std", "CHI2 (p)", "JS", "MAX |A-B| (row)", "DRIFT"):
        table.add_column(col)
    for f in c.features:
        d = f.drift
        if d is None:
            verdict = f"skipped: {f.skipped}"
        else:
            verdict = (
                f"drifted ({', '.join(d.by)})" if d.drifted else "no" + (f" ({', '.join(d.by)} only)" if d.by else "")
            )
        if f.kind == "numeric":
            diff = f"{_num(f.max_abs_diff)} (row {f.at_row})" if f.max_abs_diff is not None else "-"
        else:
            diff = f"{f.mismatches} of {f.aligned_rows} rows differ"
        table.add_row(
            f.feature,
            f.kind,
            f"{f.rows_a}/{f.rows_b}",
            _num(d.psi if d else None),
            f"{_num(d.ks)} ({_num(d.ks_p)})" if d and d.ks is not None else "-",
            _num(d.wasserstein if d else None),
            f"{_num(d.chi2)} ({_num(d.chi2_p)})" if d and d.chi2 is not None else "-",
            _num(d.js if d else None),
            diff,
            verdict,
            style="red" if d is not None and d.drifted else None,
        )
    console.print(table)
    for label, names in (("only in A", c.only_in_a), ("only in B", c.only_in_b)):
        if names:
            console.print(f"{label} (not compared): {', '.join(names)}")
    r = c.rule
    console.print(
        f"{'DRIFT' if c.drifted else 'no drift'}: {c.drifted_count} of {c.evaluated} feature(s) drifted, "
        f"{c.needed} needed (share {r.share_threshold:g}); rule: {c.rule_source}, numeric "
        f"{'+'.join(r.numeric_tests)}, categorical {'+'.join(r.categorical_tests)} ({r.combine}), alpha {r.alpha:g} "
        f"({r.correction}); A {c.rows_a} rows, B {c.rows_b} rows, numeric statistics on up to {c.sample} values each",
        style="bold red" if c.drifted else "green",
    )


def compare(
    a: Annotated[Path, typer.Argument(help="The reference: a .parquet, .csv or .jsonl file, one column per feature.")],
    b: Annotated[Path, typer.Argument(help="The data to compare with it, in any of those formats.")],
    model: Annotated[
        str | None, typer.Option("--model", help="Judge by the rule in force for this model (asks a coordinator).")
    ] = None,
    rule: Annotated[
        Path | None, typer.Option("--rule", help="Judge by this rule file (YAML/JSON, as `drift rule show` prints).")
    ] = None,
    features: Annotated[
        str | None, typer.Option("--features", help="Comma-separated columns to compare (default: every column).")
    ] = None,
    sample: Annotated[
        int, typer.Option("--sample", min=100, max=1_000_000, help="Values per numeric column the statistics use.")
    ] = DEFAULT_SAMPLE,
    output: Annotated[Format, typer.Option("--output", "-o", help="table or json.")] = Format.table,
    api: ApiOption = None,
) -> None:
    """Compare two files' feature distributions: per feature the drift statistics (PSI, KS, W1; chi-square,
    JS), the largest difference where rows line up, and the verdict. Exit 0: no drift; 1: drift; 2: bad input."""
    if model is not None and rule is not None:
        fail("--model and --rule: give one of them (the model's rule in force, or a rule file)", EXIT_BAD_INPUT)
    source = "default"
    try:
        chosen = DriftRule()
        if rule is not None:
            chosen, source = load_rule(rule), f"file {rule}"
        elif model is not None:
            chosen, source = ApiClient.from_option(api).drift(model).rule, f"model {model}"
        names = [f.strip() for f in features.split(",") if f.strip()] if features else None
        result = compare_files(a, b, chosen, names, sample)
    except (DataFileError, msgspec.ValidationError) as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    result.rule_source = source
    if output is Format.json:
        typer.echo(msgspec.json.encode(result).decode())
    else:
        print_comparison(result)
    raise typer.Exit(EXIT_DRIFT if result.drifted else EXIT_SAME)
