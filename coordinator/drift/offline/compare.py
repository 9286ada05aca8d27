"""Two local files compared feature by feature with the drift component's own statistics and rule.

A is the reference, B the data compared with it. Both are read in chunks (Parquet by row group, CSV and JSON
Lines line by line), so files larger than memory compare in bounded memory; the statistics are computed on a
uniform sample of each numeric column, categories on every value. Where the rows line up, the largest difference
per column is kept too. Errors are :class:`DataFileError`, naming the file or option and what to do.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import yaml

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
