"""Reference files read here, in each format: numeric and categorical columns, the references built from them
with the component's builders, and the files' hostile shapes refused with the reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from myolo.coordinator.drift.offline.baseline import references_from_file
from myolo.coordinator.drift.offline.files import DataFileError, read_columns
from tests.support.coordinator.drift_files import reference_table, write


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_each_format_reads_numeric_and_categorical_columns(tmp_path: Path, suffix: str) -> None:
    cols = reference_table(np.random.default_rng(1))
    got = read_columns(write(tmp_path / f"ref{suffix}", cols))
    assert sorted(got.numeric) == ["age", "income"] and sorted(got.categorical) == ["plan"]
    assert np.allclose(got.numeric["income"], cols["income"]) and got.categorical["plan"] == cols["plan"]
    assert got.rows == 500
    only = read_columns(tmp_path / f"ref{suffix}", ["income"])
    assert list(only.numeric) == ["income"] and not only.categorical


def test_bad_reference_files_are_refused_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "ragged.csv").write_text("a,b\n1,2\n3\n")
    (tmp_path / "nested.jsonl").write_text('{"a": {"b": 1}}\n')
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 not really")
    (tmp_path / "empty.csv").write_text("a,b\n,\n")
    (tmp_path / "data.xlsx").write_text("x")
    cases = {
        "ragged.csv": "line 3 has 1 cells, the header 2",
        "nested.jsonl": "nested values are not features",
        "broken.parquet": "not a readable Parquet file",
        "empty.csv": "column 'a' has no values",
        "data.xlsx": "give a .parquet, .csv or .jsonl",
        "missing.csv": "cannot read it",
    }
    for name, reason in cases.items():
        with pytest.raises(DataFileError, match=reason):
            read_columns(tmp_path / name)
    write(tmp_path / "ok.csv", reference_table(np.random.default_rng(2)))
    with pytest.raises(DataFileError, match=r"--features: \['nope'\] not in"):
        read_columns(tmp_path / "ok.csv", ["nope"])


def test_references_from_a_file_are_the_components_own(tmp_path: Path) -> None:
    built = references_from_file(write(tmp_path / "ref.csv", reference_table(np.random.default_rng(4))), max_values=50)
    assert built.rows == 500 and list(built.by_name()) == ["age", "income", "plan"]
    assert built.numeric["income"].count == 500 and len(built.numeric["income"].values) <= 50
    assert built.categorical["plan"].count == 500 and sorted(built.categorical["plan"].counts) == [
        "basic",
        "pro",
        "team",
    ]
