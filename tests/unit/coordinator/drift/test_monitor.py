"""The rule and the monitor: a real shift is detected within M evaluations, a stationary stream never is, and
what cannot be evaluated is reported rather than crashing. Simulated time, seeded traffic."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest

from myolo.coordinator.drift.monitor import MAX_FEATURES, Monitor, Streak
from myolo.coordinator.drift.reference import Categories, Histogram, Values, categorical_reference, numeric_reference
from myolo.coordinator.drift.rule import DriftRule, Evaluation, decide, evaluate
from myolo.events.payloads.external import DriftSample, FeatureSummary
from myolo.events.payloads.models import FeatureDrift

T0 = 1_767_225_600.0  # a multiple of 600 s
FEATURES = [f"f{i:02d}" for i in range(20)]


def sample(features: dict[str, FeatureSummary], model: str = "m", version: str | None = "1") -> DriftSample:
    return DriftSample(model=model, version=version, features=features)


def play(
    monitor: Monitor, rng: np.random.Generator, minutes: range, shift_from: int | None = None, shift: float = 1.0
) -> list[Evaluation]:
    """A DriftSample a minute (Poisson batches, 1,000 requests an hour) over 20 standard normal features; from
    minute ``shift_from`` on, f00..f02 are shifted by ``shift``. Evaluates whenever due."""
    out = []
    for minute in minutes:
        now = T0 + minute * 60 + 30
        x = rng.standard_normal((len(FEATURES), int(rng.poisson(1000 / 60))))
        if shift_from is not None and minute >= shift_from:
            x[:3] += shift
        observed = monitor.observe(
            sample({f: FeatureSummary(values=x[i].tolist()) for i, f in enumerate(FEATURES)}), now
        )
        assert not observed.refused
        result = monitor.evaluate(now)
        if result is not None:
            out.append(result)
    return out


# ---- the monitor -------------------------------------------------------------------------------------------


def test_a_one_std_shift_on_3_of_20_features_is_detected_within_m_evaluations() -> None:
    monitor = Monitor("m", "1", seed=1)
    onset = 7 * 60  # minutes: the references are learned by hour 5, an hour of stationary windows after
    results = play(monitor, np.random.default_rng(1), range(0, onset + 90), shift_from=onset)
    assert not monitor.learning and len(monitor.references) == 20
    before = [r for r in results if r.at is not None and r.at < T0 + onset * 60]
    after = [r for r in results if r.at is not None and r.at >= T0 + onset * 60]
    assert not any(r.detected for r in before)
    # after[i] is i x 10 min (and 30 s) after the onset: after[3] and after[4], windows half and two thirds
    # shifted, are M = 2 evaluations that cannot miss a 1-std shift (it is detected at after[2] or after[3])
    first = next(i for i, r in enumerate(after) if r.detected)
    assert first <= 2 + monitor.rule.consecutive
    detection = after[first]
    assert detection.consecutive == 2 and detection.evaluated == 20
    assert {"f00", "f01", "f02"} <= {f.feature for f in detection.features if f.drifted}
    assert detection.window_end == detection.at and detection.window_start == detection.at - 3600
    shifted = next(f for f in detection.features if f.feature == "f00")
    assert shifted.by == ["ks", "wasserstein"] and shifted.wasserstein > 0.3
    assert monitor.detections == 1  # one drift, one detection: the next needs a window of new traffic


def test_a_stationary_stream_is_never_detected() -> None:
    monitor = Monitor("m", "1", seed=2)
    results = play(monitor, np.random.default_rng(2), range(0, 18 * 60))
    evaluated = [r for r in results if r.evaluated == 20]
    assert len(evaluated) > 70 and monitor.detections == 0
    assert sum(r.drifted for r in evaluated) <= 1  # a drifted window needs 3 of the 20 features
    assert max(r.drifted_count for r in evaluated) <= 2


def test_a_persisting_drift_is_detected_again_only_after_the_window_has_turned_over() -> None:
    monitor = Monitor("m", "1", seed=3)
    results = play(monitor, np.random.default_rng(3), range(0, 6 * 60 + 150), shift_from=6 * 60)
    detected = [r.at for r in results if r.detected and r.at is not None]
    assert len(detected) == 2
    assert detected[1] - detected[0] == pytest.approx(3600 + 600)  # a full window, then M = 2 evaluations


def test_features_without_a_reference_are_reported_as_missing_until_learned() -> None:
    rng = np.random.default_rng(4)
    rule = DriftRule(min_count=10, reference_count=100, consecutive=1)
    known = numeric_reference("known", rng.standard_normal(1000))
    monitor = Monitor("m", "1", rule, references={"known": known})
    for minute in range(2):
        now = T0 + minute * 300
        x = rng.standard_normal((2, 40))
        monitor.observe(
            sample({"known": FeatureSummary(values=x[0].tolist()), "new": FeatureSummary(values=x[1].tolist())}), now
        )
    assert monitor.learning == ["new"]
    first = monitor.evaluate(T0 + 600)
    assert first is not None and first.missing == ["new"] and [f.feature for f in first.features] == ["known"]
    monitor.observe(sample({"new": FeatureSummary(values=rng.standard_normal(20).tolist())}), T0 + 700)
    assert monitor.learning == [] and set(monitor.references) == {"known", "new"}
    second = monitor.evaluate(T0 + 1200)
    assert second is not None and second.missing == [] and second.evaluated == 2


def test_bad_features_are_refused_one_by_one_and_the_others_taken() -> None:
    monitor = Monitor("m", "1")
    observed = monitor.observe(
        sample(
            {
                "ok": FeatureSummary(values=[1.0, 2.0]),
                "nan": FeatureSummary(values=[1.0, float("nan")]),
                "hist": FeatureSummary(bin_edges=[0.0, 1.0, 2.0], counts=[1]),
            }
        ),
        T0,
    )
    assert observed.accepted == ["ok"]
    assert "feature 'nan': values[1] is nan" in observed.refused["nan"]
    assert "1 counts for 3 bin_edges" in observed.refused["hist"]
    changed = monitor.observe(sample({"hist": FeatureSummary(bin_edges=[0.0, 1.0, 2.0], counts=[1, 1])}), T0 + 1)
    assert changed.accepted == ["hist"]
    refused = monitor.observe(sample({"hist": FeatureSummary(bin_edges=[0.0, 1.5, 2.0], counts=[1, 1])}), T0 + 2)
    assert "bin_edges differ" in refused.refused["hist"]


def test_at_most_256_features_per_model() -> None:
    monitor = Monitor("m", "1")
    for start in range(0, MAX_FEATURES, 128):
        features = {f"f{i}": FeatureSummary(values=[1.0]) for i in range(start, start + 128)}
        assert not monitor.observe(sample(features), T0).refused
    observed = monitor.observe(
        sample({"one-more": FeatureSummary(values=[1.0]), "f0": FeatureSummary(values=[2.0])}), T0
    )
    assert observed.accepted == ["f0"] and "already has 256 features" in observed.refused["one-more"]


def test_a_sample_of_another_model_or_version_is_an_error() -> None:
    monitor = Monitor("m", "1")
    with pytest.raises(ValueError, match="a sample of 'other' version '1' given to the monitor of 'm' version '1'"):
        monitor.observe(sample({}, model="other"), T0)
    with pytest.raises(ValueError, match="version '2'"):
        monitor.observe(sample({}, version="2"), T0)
    assert monitor.observe(sample({}, version=None), T0).accepted == []  # no version: taken as this one


def test_evaluations_fall_on_multiples_of_every_s_and_a_late_call_does_one() -> None:
    monitor = Monitor("m", "1")
    assert not monitor.due(T0) and monitor.evaluate(T0 + 10_000) is None  # nothing observed yet
    monitor.observe(sample({"x": FeatureSummary(values=[1.0])}), T0 + 30)
    assert not monitor.due(T0 + 599.0) and monitor.evaluate(T0 + 599.0) is None
    first = monitor.evaluate(T0 + 600)
    assert first is not None and first.evaluated == 0 and first.missing == ["x"]
    assert monitor.evaluate(T0 + 600) is None
    assert monitor.evaluate(T0 + 2000) is not None  # 2 periods late: one evaluation
    assert not monitor.due(T0 + 2399) and monitor.due(T0 + 2400)


def test_the_streak_counts_in_a_row_detects_at_m_then_waits_a_window() -> None:
    streak = Streak(consecutive=2, window_s=3600)
    assert streak.update(True, 0).consecutive == 1
    assert streak.update(None, 600) == (1, False)  # nothing evaluated: no evidence either way
    assert streak.update(True, 1200) == (2, True)
    assert streak.count == 0 and streak.detections == 1
    assert all(not streak.update(True, t).detected for t in range(1800, 4800, 600))  # the window still holds it
    assert streak.update(True, 4800) == (1, False)
    assert streak.update(False, 5400) == (0, False)
    assert streak.update(True, 6000) == (1, False) and streak.update(True, 6600) == (2, True)


# ---- the rule --------------------------------------------------------------------------------------------


def test_the_defaults() -> None:
    rule = DriftRule()
    assert rule.numeric_tests == ["ks", "wasserstein"] and rule.categorical_tests == ["chi2", "js"]
    assert (rule.combine, rule.alpha, rule.correction) == ("all", 0.05, "bonferroni")
    assert (rule.psi_threshold, rule.wasserstein_threshold, rule.js_threshold) == (0.25, 0.1, 0.1)
    assert (rule.share_threshold, rule.consecutive) == (0.15, 2)
    assert (rule.window_s, rule.buckets, rule.every_s, rule.min_count, rule.reference_count) == (
        3600,
        6,
        600,
        200,
        5000,
    )
    assert rule.drifted_needed(20) == 3 and rule.drifted_needed(10) == 2 and rule.drifted_needed(1) == 1
    assert DriftRule(share_threshold=0.1).drifted_needed(20) == 2


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"alpha": 1.5}, r"Expected `float` < 1.0 - at `\$.alpha`"),
        ({"consecutive": 0}, r"at `\$.consecutive`"),
        ({"numeric_tests": ["t-test"]}, r"at `\$.numeric_tests\[0\]`"),
        ({"numeric_tests": []}, r"at `\$.numeric_tests`"),
        ({"correction": "holm"}, r"at `\$.correction`"),
        ({"windows": 3}, "unknown field `windows`"),
        ({"every_s": 7200}, "every_s: 7200.0 > window_s 3600.0"),
        ({"numeric_tests": ["ks", "ks"]}, "numeric_tests: .* names a test twice"),
    ],
)
def test_a_rule_is_checked_when_decoded_and_the_error_names_the_field(fields: dict, message: str) -> None:
    with pytest.raises(msgspec.ValidationError, match=message):
        msgspec.convert(fields, DriftRule)


def test_a_rule_round_trips_through_json() -> None:
    rule = DriftRule(numeric_tests=["psi"], share_threshold=0.5)
    assert msgspec.json.decode(msgspec.json.encode(rule), type=DriftRule) == rule


def feature(**kw) -> FeatureDrift:
    return FeatureDrift(feature=kw.pop("name", "x"), kind=kw.pop("kind", "numeric"), count=1000, **kw)


def test_p_values_are_corrected_across_features() -> None:
    def drifted(rule: DriftRule) -> list[bool]:
        results = [feature(name="a", ks=0.1, ks_p=0.01, wasserstein=0.5)] + [
            feature(name=f"n{i}", ks=0.01, ks_p=0.9, wasserstein=0.01) for i in range(9)
        ]
        decide(results, rule)
        return [f.drifted for f in results]

    assert drifted(DriftRule(correction="none"))[0] is True
    assert drifted(DriftRule(correction="bonferroni"))[0] is False  # 0.01 x 10 features = 0.1 > 0.05
    assert drifted(DriftRule(correction="fdr_bh"))[0] is False  # 0.01 x 10 / rank 1
    assert drifted(DriftRule(correction="bonferroni", alpha=0.2))[0] is True


def test_all_needs_every_deciding_test_and_any_needs_one() -> None:
    def verdict(rule: DriftRule) -> tuple[bool, list[str]]:
        f = feature(ks=0.02, ks_p=0.5, wasserstein=0.3, psi=0.3)  # a large distance that is not significant
        decide([f], rule)
        return f.drifted, f.by

    assert verdict(DriftRule()) == (False, ["wasserstein"])  # by: the tests that fired
    assert verdict(DriftRule(combine="any")) == (True, ["wasserstein"])
    assert verdict(DriftRule(numeric_tests=["psi"])) == (True, ["psi"])
    assert verdict(DriftRule(numeric_tests=["ks"])) == (False, [])


def test_evaluate_computes_every_statistic_and_reports_what_it_skipped() -> None:
    rng = np.random.default_rng(5)
    refs = {
        "num": numeric_reference("num", rng.standard_normal(5000)),
        "hist": numeric_reference("hist", rng.standard_normal(5000)),
        "cat": categorical_reference("cat", {"a": 500, "b": 500}),
        "few": numeric_reference("few", rng.standard_normal(100)),
        "wrong": categorical_reference("wrong", {"a": 1}),
    }
    edges = np.linspace(-4, 6, 41)
    counts, _ = np.histogram(rng.normal(1, 1, 2000), edges)
    windows = {
        "num": Values(rng.normal(1, 1, 1000), 1000),
        "hist": Histogram(edges, counts),
        "cat": Categories({"a": 100, "b": 100, "new": 800}),
        "few": Values(rng.standard_normal(50), 50),
        "wrong": Values(rng.standard_normal(500), 500),
        "unknown": Values(rng.standard_normal(500), 500),
        "empty": None,
    }
    result = evaluate(refs, windows, DriftRule())
    assert [f.feature for f in result.features] == ["cat", "hist", "num"]
    assert result.missing == ["unknown"]
    assert result.skipped == {
        "few": "50 values in the window < min_count 200",
        "wrong": "the window holds values, the reference is categorical",
    }
    cat, hist, num = result.features
    assert num.psi and num.ks and num.ks_p is not None and num.wasserstein and num.chi2 is None
    assert num.drifted and num.by == ["ks", "wasserstein"] and num.wasserstein == pytest.approx(1.0, abs=0.15)
    assert hist.drifted and hist.count == 2000
    assert cat.drifted and cat.by == ["chi2", "js"] and cat.psi is None and cat.js and cat.js > 0.5
    assert (result.evaluated, result.drifted_count, result.share, result.drifted) == (3, 3, 1.0, True)
    assert msgspec.json.decode(msgspec.json.encode(result), type=Evaluation) == result  # every value is valid
