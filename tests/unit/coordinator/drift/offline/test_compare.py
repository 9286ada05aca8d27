"""Two files with a known shift compared offline, in each format: the drift component's statistics per feature,
the verdict by the rule, the largest difference where rows line up, and memory bounded by chunks and the sample."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from myolo.coordinator.drift.offline.compare import compare_files
from myolo.coordinator.drift.offline.sketch import FileSketch
from myolo.coordinator.drift.offline.stream import CHUNK_ROWS, chunks
from myolo.coordinator.drift.rule import DriftRule
from tests.support.coordinator.drift_files import ROWS, SPIKE, columns, write


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


def test_the_largest_difference_where_rows_line_up(tmp_path: Path) -> None:
    a = write(tmp_path / "a.csv", columns(0.0))
    b = write(tmp_path / "b.parquet", columns(0.0, spike=True))
    result = compare_files(a, b, DriftRule())
    x = next(f for f in result.features if f.feature == "x")
    assert (x.max_abs_diff, x.at_row, x.aligned_rows) == (pytest.approx(7.0), SPIKE, ROWS)
    c = next(f for f in result.features if f.feature == "c")
    assert c.mismatches == 0 and c.max_abs_diff is None
    assert not result.drifted


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
