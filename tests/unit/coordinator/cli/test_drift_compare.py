"""``myoloctl drift compare A B`` on files with a known shift, in each format: the drift component's statistics
per feature, the verdict by the rule, the largest difference where rows line up, and exit codes 0/1/2."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from myolo.coordinator.cli.drift_compare import Comparison, compare_files
from myolo.coordinator.cli.main import app
from myolo.coordinator.drift.offline.sketch import FileSketch
from myolo.coordinator.drift.offline.stream import CHUNK_ROWS, chunks
from myolo.coordinator.drift.rule import DriftRule

ROWS = 20_000
SPIKE = 12_345  # a row past the first chunk: its offset must count


def columns(shift: float, spike: bool = False) -> dict[str, list]:
    rng = np.random.default_rng(1)
    x = rng.normal(0.0, 1.0, ROWS)
    y = rng.normal(5.0, 2.0, ROWS)
    c = rng.choice(["a", "b", "c"], ROWS, p=[1 / 3, 1 / 3, 1 / 3])
    if shift:
        x = x + shift
        c = np.where(rng.random(ROWS) < 0.3, "a", c)  # "a" grows from a third to a half
        y = rng.normal(5.0, 2.0, ROWS)  # the same distribution, other draws
    if spike:
        x[SPIKE] += 7.0
    return {"x": x.tolist(), "y": y.tolist(), "c": c.tolist()}


def write(path: Path, cols: dict[str, list]) -> Path:
    names = list(cols)
    if path.suffix == ".csv":
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(names)
            w.writerows(zip(*cols.values(), strict=True))
    elif path.suffix == ".jsonl":
        with path.open("w") as f:
            for row in zip(*cols.values(), strict=True):
                f.write(json.dumps(dict(zip(names, row, strict=True))) + "\n")
    else:
        pq.write_table(pa.table(cols), path, row_group_size=3000)  # many row groups, not aligned to chunks
    return path


def invoke(*args: str):
    return CliRunner().invoke(app, ["drift", "compare", *args])


@pytest.mark.parametrize(("fa", "fb"), [("parquet", "parquet"), ("csv", "jsonl"), ("jsonl", "parquet")])
def test_a_known_shift_is_found_in_the_shifted_features_only(tmp_path: Path, fa: str, fb: str) -> None:
    a = write(tmp_path / f"a.{fa}", columns(0.0))
    b = write(tmp_path / f"b.{fb}", columns(0.5))
    result = compare_files(a, b, DriftRule())
    by = {f.feature: f for f in result.features}
    assert {n: f.drift.drifted for n, f in by.items()} == {"c": True, "x": True, "y": False}
    assert by["x"].kind == "numeric" and by["c"].kind == "categorical"
    assert by["x"].drift.wasserstein == pytest.approx(0.5, abs=0.05)  # the shift, in the reference's std
    assert by["x"].drift.ks_p < 1e-6 and by["y"].drift.ks_p > 0.001
    assert by["c"].drift.chi2_p < 1e-6
    assert (result.rows_a, result.rows_b, result.drifted) == (ROWS, ROWS, True)
    proc = invoke(str(a), str(b))
    assert proc.exit_code == 1, proc.output
    assert "DRIFT: 2 of 3 feature(s) drifted" in proc.output


def test_the_largest_difference_where_rows_line_up(tmp_path: Path) -> None:
    a = write(tmp_path / "a.csv", columns(0.0))
    b = write(tmp_path / "b.parquet", columns(0.0, spike=True))
    result = compare_files(a, b, DriftRule())
    x = next(f for f in result.features if f.feature == "x")
    assert (x.max_abs_diff, x.at_row, x.aligned_rows) == (pytest.approx(7.0), SPIKE, ROWS)
    c = next(f for f in result.features if f.feature == "c")
    assert c.mismatches == 0 and c.max_abs_diff is None
    assert not result.drifted


def test_a_file_against_itself_is_no_drift_and_exit_0(tmp_path: Path) -> None:
    a = write(tmp_path / "a.jsonl", columns(0.0))
    proc = invoke(str(a), str(a), "-o", "json")
    assert proc.exit_code == 0, proc.output
    import msgspec

    body = msgspec.json.decode(proc.output.encode(), type=Comparison)
    assert not body.drifted and {f.feature: f.max_abs_diff for f in body.features}["x"] == 0.0


def test_a_given_rule_decides(tmp_path: Path) -> None:
    a = write(tmp_path / "a.csv", columns(0.0))
    b = write(tmp_path / "b.csv", columns(0.5))
    rule = tmp_path / "rule.yaml"
    rule.write_text("rule_source: model\nrule:\n  share_threshold: 1.0\n")  # as `drift rule show` prints it
    proc = invoke(str(a), str(b), "--rule", str(rule))
    assert proc.exit_code == 0, proc.output  # 2 of 3 is not all: no drift by this rule
    assert "rule: file" in proc.output


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda d: (d / "none.csv", d / "a.csv"), "none.csv: cannot read it"),
        (lambda d: (d / "a.txt", d / "a.csv"), "unknown format '.txt'"),
        (lambda d: ((d / "bad.csv").write_text("x,y\n1,2\n3\n") and d / "bad.csv", d / "a.csv"), "line 3 has 1 cells"),
        (lambda d: ((d / "bad.jsonl").write_text('{"x": 1}\n[1]\n') and d / "bad.jsonl", d / "a.csv"), "line 2"),
        (lambda d: ((d / "bad.parquet").write_bytes(b"PAR1 nope") and d / "bad.parquet", d / "a.csv"), "Parquet"),
    ],
)
def test_bad_input_exits_2_naming_the_file_and_why(tmp_path: Path, make, words: str) -> None:
    (tmp_path / "a.txt").write_text("x\n1\n")
    write(tmp_path / "a.csv", {"x": [1.0, 2.0]})
    first, second = make(tmp_path)
    proc = invoke(str(first), str(second))
    assert proc.exit_code == 2, proc.output
    assert words in proc.output.replace("\n", " ")


def test_unknown_features_and_a_bad_rule_exit_2(tmp_path: Path) -> None:
    a = write(tmp_path / "a.csv", {"x": [1.0, 2.0]})
    proc = invoke(str(a), str(a), "--features", "nope")
    assert proc.exit_code == 2 and "nope" in proc.output
    bad = tmp_path / "rule.json"
    bad.write_text('{"alpha": 3}')
    proc = invoke(str(a), str(a), "--rule", str(bad))
    assert proc.exit_code == 2 and "alpha" in proc.output


def test_memory_is_bounded_by_chunks_and_the_sample(tmp_path: Path) -> None:
    a = write(tmp_path / "a.parquet", columns(0.0))
    sizes = [len(chunk["x"]) for chunk in chunks(a)]
    assert sizes[:-1] == [CHUNK_ROWS] * (len(sizes) - 1) and sum(sizes) == ROWS
    sketch = FileSketch("a", sample=500)
    for chunk in chunks(a):
        sketch.add("x", chunk["x"])
    col = sketch.columns["x"]
    assert col.sample.size == 500 and col.cells == ROWS
    assert abs(float(np.mean(col.sample))) < 0.2  # a uniform sample: near the column's mean
