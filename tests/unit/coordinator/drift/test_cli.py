"""`myoloctl drift ...` against a leading coordinator's real API on a real port (no broker: its writes are
recorded): references from Parquet, CSV and JSON Lines files, the rule merged and refused by field, the status
tables (the files' readers themselves: ``offline/test_files.py``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from myolo.coordinator.drift.component import Drift
from myolo.events.payloads import DriftSample, FeatureSummary
from tests.support.api_auth import OPERATOR, VIEWER
from tests.support.coordinator.drift_files import reference_table, write
from tests.support.coordinator.registry import Leading
from tests.support.coordinator.served import myoloctl, serve


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Leading, str]]:
    lead = await Leading(tmp_path).lead()
    async with serve(lead.coord) as url:
        yield lead, url


async def test_baseline_set_from_parquet_sets_each_features_reference_for_the_champion(served, tmp_path) -> None:
    lead, url = served
    ref = write(tmp_path / "ref.parquet", reference_table(np.random.default_rng(3)))
    no_champion = await myoloctl(url, "drift", "baseline", "set", "credit-risk", "--from", str(ref))
    assert no_champion.exit_code == 2 and "has no champion in the registry; give the version" in no_champion.output
    done = await myoloctl(url, "drift", "baseline", "set", "credit-risk", "--from", str(ref), "--version", "3")
    assert done.exit_code == 0, done.output
    assert "references of 3 feature(s) recorded" in done.output
    drift = lead.coord.get(Drift)
    refs = drift.references[("credit-risk", "3")]
    assert sorted(refs) == ["age", "income", "plan"]
    assert refs["income"].numeric is not None and refs["income"].numeric.count == 500
    assert refs["plan"].categorical is not None and refs["plan"].categorical.count == 500
    assert {r.source for r in refs.values()} == {"file:ref.parquet"}
    assert {r.by for r in refs.values()} == {f"operator:{OPERATOR}"}
    refused = await myoloctl(url, "drift", "baseline", "set", "credit-risk", "--from", str(ref), who=VIEWER)
    assert refused.exit_code != 0


async def test_rule_set_changes_the_options_given_and_a_bad_value_names_its_field(served) -> None:
    lead, url = served
    done = await myoloctl(url, "drift", "rule", "set", "credit-risk", "--share", "0.3", "--window", "30m")
    assert done.exit_code == 0, done.output
    rule = lead.coord.get(Drift).rule("credit-risk")
    assert (rule.share_threshold, rule.window_s, rule.consecutive) == (0.3, 1800.0, 2)  # the rest as it was
    shown = await myoloctl(url, "drift", "rule", "show", "credit-risk", "-o", "json")
    assert shown.exit_code == 0, (shown.output, shown.exception)
    assert json.loads(shown.output)["rule_source"] == "model"
    bad = await myoloctl(url, "drift", "rule", "set", "credit-risk", "--share", "1.5")
    assert bad.exit_code == 2 and "share_threshold" in bad.output
    nothing = await myoloctl(url, "drift", "rule", "set", "credit-risk")
    assert nothing.exit_code == 2 and "give at least one option" in nothing.output
    reset = await myoloctl(url, "drift", "rule", "reset", "credit-risk")
    assert reset.exit_code == 0 and lead.coord.get(Drift).rules == {}


async def test_status_shows_each_features_statistics_and_the_drift(served) -> None:
    lead, url = served
    drift = lead.coord.get(Drift)
    rng = np.random.default_rng(4)
    from myolo.coordinator.drift.reference import numeric_reference
    from myolo.coordinator.drift.rule import DriftRule

    await drift.set_rule("m", DriftRule(window_s=60, every_s=10, consecutive=1, min_count=50), "t")
    for f in ("a", "b"):
        await drift.set_reference("m", "1", f, numeric_reference(f, rng.normal(0, 1, 1000)), "file:x.csv", "t")
    values = {"a": list(rng.normal(3.0, 1.0, 300)), "b": list(rng.normal(0.0, 1.0, 300))}
    features = {f: FeatureSummary(values=v) for f, v in values.items()}
    drift._observe(DriftSample(model="m", version="1", features=features))
    await lead.clock.advance(11)
    await drift.tick(lead.clock.now())
    summary = await myoloctl(url, "drift", "status")
    assert summary.exit_code == 0, summary.output
    assert "DRIFT" in summary.output and "1/2" in summary.output
    detail = await myoloctl(url, "drift", "status", "m")
    lines = {line.split()[0]: line for line in detail.output.splitlines() if line.strip()[:1] in ("a", "b")}
    assert "drifted" in lines["a"] and "ok" in lines["b"], detail.output
    assert "references of version 1: a (file:x.csv, n=1000)" in detail.output
    empty = await myoloctl(url, "drift", "status", "unknown-model", "-o", "json")
    assert json.loads(empty.output)["versions"] == []
