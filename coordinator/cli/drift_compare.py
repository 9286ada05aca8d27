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
import yaml
from rich.table import Table

from myolo.coordinator.cli.client import ApiClient, ApiOption
from myolo.coordinator.cli.exits import fail
from myolo.coordinator.cli.output import new_console
from myolo.coordinator.drift.offline.files import DataFileError
from myolo.coordinator.drift.offline.sketch import DEFAULT_SAMPLE, Aligned, FileSketch, align
from myolo.coordinator.drift.offline.stream import CHUNK_ROWS, chunks
from myolo.coordinator.drift.reference import (
    CategoricalReference,
    Categories,
    NumericReference,
    SummaryError,
    Values,
    categorical_reference,
    numeric_reference,
)
from myolo.coordinator.drift.rule import DriftRule, Evaluation, evaluate
from myolo.events.payloads.models import FeatureDrift

EXIT_SAME, EXIT_DRIFT, EXIT_BAD_INPUT = 0, 1, 2


class FeatureComparison(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One column: its kind, its non-empty cells in each file, its statistics and verdict (``drift``; None
    with ``skipped`` saying why when it was not evaluated), and where the rows line up, the largest absolute
    difference (numeric) and the rows whose values differ."""

    feature: str
    kind: str
    rows_a: int
    rows_b: int
    drift: FeatureDrift | None = None
    skipped: str | None = None
    aligned_rows: int = 0
    max_abs_diff: float | None = None
    at_row: int | None = None
    mismatches: int = 0


class Comparison(msgspec.Struct, kw_only=True):
    a: str
    b: str
    rows_a: int
    rows_b: int
    drifted: bool
    drifted_count: int
    evaluated: int
    needed: int  # drifted features the rule needs for the whole to drift
    features: list[FeatureComparison]
    only_in_a: list[str]
    only_in_b: list[str]
    rule: DriftRule
    rule_source: str
    sample: int


def compare_files(
    a: Path, b: Path, rule: DriftRule, features: list[str] | None = None, sample: int = DEFAULT_SAMPLE
) -> Comparison:
    """Both files read once, side by side; :class:`DataFileError` names the file and what is wrong."""
    sa, sb = FileSketch(str(a), sample), FileSketch(str(b), sample)
    aligned: dict[str, Aligned] = {}
    it_a, it_b = chunks(a), chunks(b)
    first_row = 0
    while True:
        ca, cb = next(it_a, None), next(it_b, None)
        if ca is None and cb is None:
            break
        parsed_a = _take(sa, ca, features)
        parsed_b = _take(sb, cb, features)
        for name in parsed_a.keys() & parsed_b.keys():
            align(aligned.setdefault(name, Aligned()), first_row, parsed_a[name], parsed_b[name])
        first_row += CHUNK_ROWS
    if features:
        absent = [f for f in features if f not in sa.columns and f not in sb.columns]
        if absent:
            raise DataFileError(f"--features: {absent} in neither {a} nor {b}")
    return _judge(sa, sb, aligned, rule)


def _take(sketch: FileSketch, chunk: dict[str, list[object]] | None, features: list[str] | None) -> dict[str, tuple]:
    if chunk is None:
        return {}
    sketch.rows += len(next(iter(chunk.values()))) if chunk else 0
    return {name: sketch.add(name, cells) for name, cells in chunk.items() if features is None or name in features}


def _judge(sa: FileSketch, sb: FileSketch, aligned: dict[str, Aligned], rule: DriftRule) -> Comparison:
    references: dict[str, NumericReference | CategoricalReference] = {}
    windows: dict[str, Values | Categories | None] = {}
    rows: list[FeatureComparison] = []
    for name in sorted(sa.columns.keys() & sb.columns.keys()):
        col_a, col_b = sa.columns[name], sb.columns[name]
        numeric = col_a.numeric and col_b.numeric
        line = aligned.get(name, Aligned())
        row = FeatureComparison(
            feature=name,
            kind="numeric" if numeric else "categorical",
            rows_a=col_a.cells,
            rows_b=col_b.cells,
            aligned_rows=line.rows,
            max_abs_diff=line.max_abs_diff if numeric else None,
            at_row=line.at_row if numeric else None,
            mismatches=line.mismatches,
        )
        rows.append(row)
        try:
            if numeric:
                references[name] = numeric_reference(name, col_a.sample)
                windows[name] = Values(col_b.sample, len(col_b.sample))
            elif col_a.cells and col_b.cells:
                references[name] = categorical_reference(name, col_a.counts, col_a.other)
                windows[name] = Categories(dict(col_b.counts), col_b.other)
            else:
                row.skipped = f"no values in {sa.name if not col_a.cells else sb.name}"
        except SummaryError as exc:
            row.skipped = str(exc)
    result: Evaluation = evaluate(references, windows, rule)
    by_name = {f.feature: f for f in result.features}
    for row in rows:
        row.drift = by_name.get(row.feature)
        if row.drift is None and row.skipped is None:
            row.skipped = result.skipped.get(row.feature, "not evaluated")
    return Comparison(
        a=sa.name,
        b=sb.name,
        rows_a=sa.rows,
        rows_b=sb.rows,
        drifted=result.drifted,
        drifted_count=result.drifted_count,
        evaluated=result.evaluated,
        needed=rule.drifted_needed(result.evaluated) if result.evaluated else 0,
        features=rows,
        only_in_a=sorted(sa.columns.keys() - sb.columns.keys()),
        only_in_b=sorted(sb.columns.keys() - sa.columns.keys()),
        rule=rule,
        rule_source="default",
        sample=sa.sample,
    )


# ---- the command ------------------------------------------------------------------------------------------


class Format(enum.StrEnum):
    table = "table"
    json = "json"


def load_rule(path: Path) -> DriftRule:
    """A rule file: YAML or JSON of the rule's fields (``myoloctl drift rule show`` prints one)."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise DataFileError(f"--rule {path}: cannot read it: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("rule"), dict):
        data = data["rule"]  # as `drift rule show` prints it: {rule_source, rule}
    try:
        return msgspec.convert(data, DriftRule)
    except (msgspec.ValidationError, ValueError) as exc:
        raise DataFileError(f"--rule {path}: not a drift rule: {exc}") from None


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
