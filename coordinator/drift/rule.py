"""When a model's traffic has drifted: the rule, and the evaluation of every feature's window against it.

Every statistic is computed for display (PSI, KS and W1 for a numeric feature; chi-square and JS for a
categorical one); only the rule's deciding tests say whether the feature drifted. A p-value test fires when
its p-value, adjusted across all the features tested (``correction``), is under ``alpha``; a distance test
when the distance reaches its threshold. By default a feature drifts when *all* its deciding tests fire: the
p-value test says the difference is not noise, the distance says it is large enough to matter. Either alone
fails somewhere: KS flags immaterial differences once windows are large, and a fixed W1 or JS threshold is
crossed by noise alone when they are small (W1 over its 0.1 default in most windows of 250 values). A
window drifts when the share of drifted features reaches ``share_threshold`` (0.15: 3 of 20 features, 2 of
10). The figures behind the defaults: tests/benchmarks/drift.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Literal

import msgspec
import numpy as np

from myolo.coordinator.drift import stats
from myolo.coordinator.drift.reference import (
    CategoricalReference,
    Categories,
    FeatureData,
    Histogram,
    NumericReference,
    Reference,
    Values,
    kind_name,
)
from myolo.events.payloads.models import FeatureDrift

NumericTest = Literal["psi", "ks", "wasserstein"]
CategoricalTest = Literal["chi2", "js"]
P_VALUE_TESTS = frozenset({"ks", "chi2"})
_SHARE_TOLERANCE = 1e-9  # 0.15 * 20 is 3.0000000000000004 in floats: 3 of 20 features still reach a 0.15 share


class DriftRule(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A model's drift rule. Decoded (``msgspec.convert``/``decode``), every bound is checked and an error
    names the field; built in code, ``__post_init__`` checks what ties fields together."""

    numeric_tests: Annotated[list[NumericTest], msgspec.Meta(min_length=1, max_length=3)] = msgspec.field(
        default_factory=lambda: ["ks", "wasserstein"]
    )
    categorical_tests: Annotated[list[CategoricalTest], msgspec.Meta(min_length=1, max_length=2)] = msgspec.field(
        default_factory=lambda: ["chi2", "js"]
    )
    combine: Literal["any", "all"] = "all"  # a feature drifts when all (any) of its deciding tests fire
    alpha: Annotated[float, msgspec.Meta(gt=0.0, lt=1.0)] = 0.05
    correction: stats.Correction = "bonferroni"
    psi_threshold: Annotated[float, msgspec.Meta(gt=0.0, le=10.0)] = 0.25
    wasserstein_threshold: Annotated[float, msgspec.Meta(gt=0.0, le=10.0)] = 0.1  # in reference std
    js_threshold: Annotated[float, msgspec.Meta(gt=0.0, le=1.0)] = 0.1
    share_threshold: Annotated[float, msgspec.Meta(gt=0.0, le=1.0)] = 0.15  # share of drifted features
    consecutive: Annotated[int, msgspec.Meta(ge=1, le=100)] = 2  # drifted evaluations in a row to detect
    window_s: Annotated[float, msgspec.Meta(ge=60.0, le=30 * 86400.0)] = 3600.0
    buckets: Annotated[int, msgspec.Meta(ge=1, le=60)] = 6  # the window leaves a bucket at a time
    every_s: Annotated[float, msgspec.Meta(ge=10.0, le=86400.0)] = 600.0  # evaluation period
    min_count: Annotated[int, msgspec.Meta(ge=10, le=1_000_000)] = 200  # values in a window to evaluate it
    reference_count: Annotated[int, msgspec.Meta(ge=100, le=1_000_000)] = 5000  # values to learn a reference
    bucket_values: Annotated[int, msgspec.Meta(ge=100, le=10_000)] = 1000  # raw values a bucket keeps

    def __post_init__(self) -> None:
        for name in ("numeric_tests", "categorical_tests"):
            tests = getattr(self, name)
            if len(set(tests)) != len(tests):
                raise ValueError(f"{name}: {tests} names a test twice; list each once")
        if self.every_s > self.window_s:
            raise ValueError(
                f"every_s: {self.every_s} > window_s {self.window_s}; evaluations further apart than the window "
                f"would skip traffic"
            )

    def drifted_needed(self, evaluated: int) -> int:
        """Drifted features needed among ``evaluated`` for the window to drift (at least one)."""
        return max(1, math.ceil(self.share_threshold * evaluated - _SHARE_TOLERANCE))


class Evaluation(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One evaluation: each evaluated feature's statistics, and whether the window drifted.

    ``missing``: features of the window without a reference (still learning one, or new since it was
    made); ``skipped``: features not evaluated and why (too few values, a kind other than the reference's).
    The monitor fills the fields after ``drifted``: the time and the window, the drifted evaluations in a row
    and whether this one made the model's drift detected.
    """

    features: list[FeatureDrift]
    evaluated: int
    drifted_count: int
    share: float
    drifted: bool
    missing: list[str] = []
    skipped: dict[str, str] = {}
    at: float | None = None
    window_start: float | None = None
    window_end: float | None = None
    consecutive: int = 0
    detected: bool = False


def evaluate(
    references: Mapping[str, Reference], windows: Mapping[str, FeatureData | None], rule: DriftRule
) -> Evaluation:
    """Every feature of ``windows`` (their data at one time, ``FeatureWindow.snapshot``) against its reference."""
    results: list[FeatureDrift] = []
    missing: list[str] = []
    skipped: dict[str, str] = {}
    for feature in sorted(windows):
        data = windows[feature]
        if data is None:
            continue
        ref = references.get(feature)
        if ref is None:
            missing.append(feature)
        elif data.count < rule.min_count:
            skipped[feature] = f"{data.count} values in the window < min_count {rule.min_count}"
        elif isinstance(ref, NumericReference) and isinstance(data, Values | Histogram):
            results.append(_numeric(feature, data, ref))
        elif isinstance(ref, CategoricalReference) and isinstance(data, Categories):
            results.append(_categorical(feature, data, ref))
        else:
            skipped[feature] = f"the window holds {kind_name(type(data))}, the reference is {_ref_kind(ref)}"
    decide(results, rule)
    drifted_count = sum(f.drifted for f in results)
    evaluated = len(results)
    return Evaluation(
        features=results,
        evaluated=evaluated,
        drifted_count=drifted_count,
        share=drifted_count / evaluated if evaluated else 0.0,
        drifted=evaluated > 0 and drifted_count >= rule.drifted_needed(evaluated),
        missing=missing,
        skipped=skipped,
    )


def _numeric(feature: str, data: Values | Histogram, ref: NumericReference) -> FeatureDrift:
    reference = np.asarray(ref.values)
    cuts = np.asarray(ref.psi_cuts)
    shares = np.asarray(ref.psi_shares)
    if isinstance(data, Values):
        window_bins = stats.bin_counts(data.values, cuts)
        ks = stats.ks(data.values, reference, ref.count)
        w1 = stats.wasserstein(data.values, reference, ref.std)
    else:
        window_bins = stats.histogram_bin_counts(data.edges, data.counts, cuts)
        ks = stats.ks_histogram(data.edges, data.counts, reference, ref.count)
        w1 = stats.wasserstein_histogram(data.edges, data.counts, reference, ref.std)
    return FeatureDrift(
        feature=feature,
        kind="numeric",
        count=data.count,
        psi=stats.psi(shares, window_bins),
        ks=ks.statistic,
        ks_p=ks.p_value,
        wasserstein=w1,
    )


def _categorical(feature: str, data: Categories, ref: CategoricalReference) -> FeatureDrift:
    observed, expected = stats.align_categories(data.counts, ref.counts, data.other, ref.other)
    chi2 = stats.chi_square(observed, expected)
    return FeatureDrift(
        feature=feature,
        kind="categorical",
        count=data.count,
        chi2=chi2.statistic,
        chi2_p=chi2.p_value,
        js=stats.js_distance(observed, expected),
    )


def decide(results: list[FeatureDrift], rule: DriftRule) -> None:
    """Set ``by`` (the deciding tests that fired) and ``drifted`` on each feature, p-values adjusted together."""
    p_values = [_p_value(f, rule) for f in results]
    tested = [i for i, p in enumerate(p_values) if p is not None]
    adjusted = stats.adjust(np.asarray([p_values[i] for i in tested], dtype=float), rule.correction)
    significant = {i for i, q in zip(tested, adjusted, strict=True) if q < rule.alpha}
    for i, f in enumerate(results):
        deciding = rule.numeric_tests if f.kind == "numeric" else rule.categorical_tests
        fired = [t for t in deciding if (i in significant if t in P_VALUE_TESTS else _over(f, t, rule))]
        f.by = fired
        f.drifted = bool(fired) and (rule.combine == "any" or len(fired) == len(deciding))


def _p_value(f: FeatureDrift, rule: DriftRule) -> float | None:
    if f.kind == "numeric":
        return f.ks_p if "ks" in rule.numeric_tests else None
    return f.chi2_p if "chi2" in rule.categorical_tests else None


def _over(f: FeatureDrift, test: str, rule: DriftRule) -> bool:
    value, threshold = {
        "psi": (f.psi, rule.psi_threshold),
        "wasserstein": (f.wasserstein, rule.wasserstein_threshold),
        "js": (f.js, rule.js_threshold),
    }[test]
    return value is not None and value >= threshold


def _ref_kind(ref: Reference) -> str:
    return "numeric" if isinstance(ref, NumericReference) else "categorical"
