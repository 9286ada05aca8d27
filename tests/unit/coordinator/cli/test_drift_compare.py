"""``myoloctl drift compare A B``: the verdict as exit codes 0/1/2, the rule it is judged by, the JSON output,
and bad input refused naming the file and why (the statistics themselves: ``drift/offline/test_compare.py``)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from myolo.coordinator.cli.main import app
from myolo.coordinator.drift.offline.compare import Comparison
from tests.support.coordinator.drift_files import columns, write


def invoke(*args: str):
    return CliRunner().invoke(app, ["drift", "compare", *args])


@pytest.mark.parametrize(("fa", "fb"), [("parquet", "parquet"), ("csv", "jsonl")])
def test_a_shift_exits_1_with_the_verdict(tmp_path: Path, fa: str, fb: str) -> None:
    a = write(tmp_path / f"a.{fa}", columns(0.0))
    b = write(tmp_path / f"b.{fb}", columns(0.5))
    proc = invoke(str(a), str(b))
    assert proc.exit_code == 1, proc.output
    assert "DRIFT: 2 of 3 feature(s) drifted" in proc.output


def test_a_file_against_itself_is_no_drift_and_exit_0(tmp_path: Path) -> None:
    a = write(tmp_path / "a.jsonl", columns(0.0))
    proc = invoke(str(a), str(a), "-o", "json")
    assert proc.exit_code == 0, proc.output
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
