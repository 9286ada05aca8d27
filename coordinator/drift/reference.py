"""A feature's reference distribution, what it is built from, and the learner that builds one from traffic.

References are stored one feature per Kafka record (``myolo.state.drift``), so each is bounded: a numeric one
keeps at most ``max_values`` values (the data itself, or its evenly spaced quantiles when there is more), a
categorical one at most 1,000 categories within 64 KB of names (the rest pooled into ``other``). Either
encodes to well under 100 KB of JSON.

The summaries of a ``DriftSample`` are hostile input: :func:`parse_summary` checks each one (finite values,
a well-formed histogram, bounded categories) and says which feature is wrong and how to fix it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

import msgspec
import numpy as np

from myolo.coordinator.drift import stats
from myolo.events.payloads.external import MAX_BINS, MAX_CATEGORIES, MAX_VALUES, FeatureSummary

MAX_REFERENCE_VALUES = 2000  # the most ``max_values`` may be: 2,000 floats are ~50 KB of JSON
DEFAULT_MAX_VALUES = 1000
MAX_CATEGORY_CHARS = 256
MAX_LEARN_VALUES = 10_000_000  # raw values a reference is built from at once (80 MB as float64)
CATEGORY_BYTES = 64_000  # JSON bytes of category names (and counts) a reference keeps


class SummaryError(ValueError):
    """A feature's data cannot be used; the message names the feature and the fix."""


# ---- what a feature's data is ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Values:
    """Raw values of a numeric feature (finite). ``count``: how many values they stand for (more than
    ``len(values)`` when they are a uniform sample of a larger window)."""

    values: np.ndarray
    count: int


@dataclass(frozen=True)
class Histogram:
    """A numeric feature as counts over bins: ``len(edges) == len(counts) + 1``, edges strictly increasing."""

    edges: np.ndarray
    counts: np.ndarray  # int64

    @property
    def count(self) -> int:
        return int(self.counts.sum())


@dataclass(frozen=True)
class Categories:
    """A categorical feature: the count of each value, and ``other``, values pooled from further categories."""

    counts: dict[str, int]
    other: int = 0

    @property
    def count(self) -> int:
        return sum(self.counts.values()) + self.other


FeatureData = Values | Histogram | Categories


def parse_summary(feature: str, summary: FeatureSummary) -> FeatureData:
    """The summary checked and as arrays. Exactly one of ``values``, ``bin_edges`` + ``counts`` or
    ``categories`` must be given; a ``FeatureSummary`` built in code skips msgspec's checks, so the bounds
    are checked again here."""
    histogram = summary.counts is not None or summary.bin_edges is not None
    given = [
        name
        for name, present in (
            ("values", summary.values is not None),
            ("histogram", histogram),
            ("categories", summary.categories is not None),
        )
        if present
    ]
    if len(given) != 1:
        what = " and ".join(given) if given else "nothing"
        raise SummaryError(
            f"feature {feature!r}: the summary has {what}; give exactly one of values, bin_edges + counts or categories"
        )
    if summary.values is not None:
        return Values(_finite(feature, "values", summary.values, MAX_VALUES), len(summary.values))
    if summary.categories is not None:
        return _categories(feature, summary.categories)
    return _histogram(feature, summary.bin_edges, summary.counts)


def _finite(feature: str, field: str, raw: list[float] | np.ndarray, limit: int) -> np.ndarray:
    if len(raw) > limit:
        raise SummaryError(
            f"feature {feature!r}: {len(raw)} {field}, over {limit} in one summary; split it across samples"
        )
    try:
        values = np.asarray(raw, dtype=float)
    except (TypeError, ValueError):
        raise SummaryError(f"feature {feature!r}: {field} must be numbers") from None
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise SummaryError(
            f"feature {feature!r}: {field}[{bad[0]}] is {values[bad[0]]} ({bad.size} not finite); send finite "
            f"numbers only (drop or impute missing values before summarising)"
        )
    return values


def _histogram(feature: str, edges_raw: list[float] | None, counts_raw: list[int] | None) -> Histogram:
    if edges_raw is None or counts_raw is None:
        missing = "bin_edges" if edges_raw is None else "counts"
        raise SummaryError(f"feature {feature!r}: a histogram needs both bin_edges and counts; {missing} is missing")
    edges = _finite(feature, "bin_edges", edges_raw, MAX_BINS + 1)
    if len(counts_raw) != len(edges) - 1:
        raise SummaryError(
            f"feature {feature!r}: {len(counts_raw)} counts for {len(edges)} bin_edges; a histogram needs "
            f"len(counts) == len(bin_edges) - 1"
        )
    if len(edges) < 2:
        raise SummaryError(f"feature {feature!r}: {len(edges)} bin_edges; a histogram needs at least 2")
    if np.any(np.diff(edges) <= 0):
        i = int(np.flatnonzero(np.diff(edges) <= 0)[0])
        raise SummaryError(
            f"feature {feature!r}: bin_edges must increase strictly; bin_edges[{i + 1}] = {edges[i + 1]} "
            f"<= bin_edges[{i}] = {edges[i]}"
        )
    counts = np.asarray(counts_raw)
    if counts.dtype.kind not in "iu" or np.any(counts < 0):
        raise SummaryError(f"feature {feature!r}: counts must be whole numbers >= 0")
    return Histogram(edges, counts.astype(np.int64))


def _categories(feature: str, raw: Mapping[str, int]) -> Categories:
    if len(raw) > MAX_CATEGORIES:
        raise SummaryError(
            f"feature {feature!r}: {len(raw)} categories, over {MAX_CATEGORIES} in one summary; pool rare ones"
        )
    for name, count in raw.items():
        if not isinstance(name, str) or len(name) > MAX_CATEGORY_CHARS:
            raise SummaryError(
                f"feature {feature!r}: category names must be strings of at most {MAX_CATEGORY_CHARS} characters"
            )
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise SummaryError(
                f"feature {feature!r}: categories[{name[:40]!r}] = {count!r}; counts are whole numbers >= 0"
            )
    return Categories({k: v for k, v in raw.items() if v > 0})


# ---- references ------------------------------------------------------------------------------------------


class NumericReference(msgspec.Struct, kw_only=True):
    """A numeric feature's reference: ``values``, sorted, the data itself or (when there was more) its
    ``len(values)`` evenly spaced quantiles; ``count``, the values it was built from (the KS p-value uses it);
    mean and standard deviation of the data; the PSI bins (inner edges ``psi_cuts``, the outer bins open)
    and the share of the data in each (``psi_shares``, one more than the cuts)."""

    values: Annotated[list[float], msgspec.Meta(min_length=1, max_length=MAX_REFERENCE_VALUES)]
    count: Annotated[int, msgspec.Meta(ge=1)]
    mean: float
    std: Annotated[float, msgspec.Meta(ge=0)]
    psi_cuts: Annotated[list[float], msgspec.Meta(max_length=100)]
    psi_shares: Annotated[list[float], msgspec.Meta(min_length=1, max_length=101)]

    def __post_init__(self) -> None:
        if any(b < a for a, b in zip(self.values, self.values[1:], strict=False)):
            raise ValueError("values: a numeric reference's values must be sorted")
        if len(self.psi_shares) != len(self.psi_cuts) + 1:
            raise ValueError(f"psi_shares: {len(self.psi_shares)} shares for {len(self.psi_cuts)} cuts; need one more")
        if self.count < len(self.values):
            raise ValueError(f"count: {self.count} < the {len(self.values)} values kept; count is the data's size")


class CategoricalReference(msgspec.Struct, kw_only=True):
    """A categorical feature's reference: the count of each category kept, and ``other``, the values of the
    categories pooled beyond the bound (1,000 categories, 64 KB of names: the most frequent are kept)."""

    counts: Annotated[
        dict[Annotated[str, msgspec.Meta(max_length=MAX_CATEGORY_CHARS)], Annotated[int, msgspec.Meta(ge=0)]],
        msgspec.Meta(max_length=MAX_CATEGORIES),
    ]
    other: Annotated[int, msgspec.Meta(ge=0)] = 0

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError("counts: a categorical reference needs at least one value")

    @property
    def count(self) -> int:
        return sum(self.counts.values()) + self.other


Reference = NumericReference | CategoricalReference


def numeric_reference(
    feature: str, values: np.ndarray | list[float], max_values: int = DEFAULT_MAX_VALUES
) -> NumericReference:
    """The reference of raw values (finite, at least one)."""
    _check_max_values(max_values)
    data = np.sort(_finite(feature, "values", values, MAX_LEARN_VALUES))
    if data.size == 0:
        raise SummaryError(f"feature {feature!r}: no values; a reference needs data")
    kept = data if data.size <= max_values else np.quantile(data, (np.arange(max_values) + 0.5) / max_values)
    cuts = stats.quantile_cuts(data)
    return NumericReference(
        values=kept.tolist(),
        count=int(data.size),
        mean=float(data.mean()),
        std=float(data.std()),
        psi_cuts=cuts.tolist(),
        psi_shares=(stats.bin_counts(data, cuts) / data.size).tolist(),
    )


def histogram_reference(feature: str, histogram: Histogram, max_values: int = DEFAULT_MAX_VALUES) -> NumericReference:
    """The reference of a histogram, its values taken as spread evenly within each bin: the quantiles are
    read from that piecewise-linear CDF, the mean and standard deviation are those of that distribution."""
    _check_max_values(max_values)
    n = histogram.count
    if n == 0:
        raise SummaryError(f"feature {feature!r}: the histogram is empty; a reference needs data")
    k = min(max_values, n)
    kept = _histogram_quantiles(histogram, (np.arange(k) + 0.5) / k)
    lo, hi = histogram.edges[:-1], histogram.edges[1:]
    w = histogram.counts / n
    mean = float(np.sum(w * (lo + hi) / 2))
    second = float(np.sum(w * (lo * lo + lo * hi + hi * hi) / 3))  # E[x^2] of a uniform on [lo, hi]
    cuts = stats.quantile_cuts(kept)
    return NumericReference(
        values=kept.tolist(),
        count=n,
        mean=mean,
        std=float(np.sqrt(max(second - mean * mean, 0.0))),
        psi_cuts=cuts.tolist(),
        psi_shares=(stats.histogram_bin_counts(histogram.edges, histogram.counts, cuts) / n).tolist(),
    )


def _histogram_quantiles(h: Histogram, probs: np.ndarray) -> np.ndarray:
    ends = np.cumsum(h.counts)
    target = probs * ends[-1]
    i = np.searchsorted(ends, target, side="right")  # the first bin whose end is past the target: it has values
    start = ends[i] - h.counts[i]
    frac = (target - start) / h.counts[i]
    return h.edges[i] + frac * (h.edges[i + 1] - h.edges[i])


def categorical_reference(
    feature: str, counts: Mapping[str, int], other: int = 0, max_categories: int = MAX_CATEGORIES
) -> CategoricalReference:
    """The reference of category counts: the most frequent categories (ties by name) up to
    ``max_categories`` and 64 KB of JSON, the rest pooled into ``other``."""
    if not 1 <= max_categories <= MAX_CATEGORIES:
        raise ValueError(f"max_categories: {max_categories}; use 1..{MAX_CATEGORIES}")
    for name, c in counts.items():
        if isinstance(c, bool) or not isinstance(c, int) or c < 0 or len(name) > MAX_CATEGORY_CHARS:
            raise SummaryError(f"feature {feature!r}: categories[{name[:40]!r}] = {c!r}; counts are whole numbers >= 0")
    kept: dict[str, int] = {}
    budget = CATEGORY_BYTES
    for name, c in sorted(((k, v) for k, v in counts.items() if v > 0), key=lambda kv: (-kv[1], kv[0])):
        cost = len(msgspec.json.encode(name)) + len(str(c)) + 2
        if len(kept) < max_categories and cost <= budget:
            kept[name] = c
            budget -= cost
        else:
            other += c
    if not kept and not other:
        raise SummaryError(f"feature {feature!r}: no category has a count; a reference needs data")
    return CategoricalReference(counts=kept, other=other)


def _check_max_values(max_values: int) -> None:
    if not 10 <= max_values <= MAX_REFERENCE_VALUES:
        raise ValueError(f"max_values: {max_values}; use 10..{MAX_REFERENCE_VALUES} (each value is ~25 bytes of JSON)")


# ---- learning a reference from traffic ---------------------------------------------------------------------


class ReferenceLearner:
    """Accumulates a feature's first ``target`` values from traffic, then freezes into its reference.

    Raw values are kept up to exactly ``target`` (the rest of the batch that crosses it is dropped); histogram
    and category counts are summed, and the summary that crosses ``target`` counts whole. The feature's kind
    (values, histogram, categories) and a histogram's edges are fixed by its first summary: another kind, or
    other edges, is refused with :class:`SummaryError`. Memory: ``target`` floats, one histogram, or at most
    1,000 categories (categories first seen after that are pooled into ``other``).
    """

    def __init__(self, feature: str, target: int, max_values: int = DEFAULT_MAX_VALUES) -> None:
        if target < 1:
            raise ValueError(f"target: {target}; a reference needs at least one value")
        _check_max_values(max_values)
        self.feature, self.target, self.max_values = feature, target, max_values
        self.seen = 0
        self._values: list[np.ndarray] = []
        self._histogram: Histogram | None = None
        self._categories: dict[str, int] | None = None
        self._other = 0
        self._kind: type | None = None
        self._reference: Reference | None = None

    @property
    def ready(self) -> bool:
        return self._reference is not None

    @property
    def reference(self) -> Reference | None:
        """The frozen reference, once ``target`` values were seen."""
        return self._reference

    def add(self, data: FeatureData) -> None:
        if self._reference is not None:
            return
        if self._kind is not None and type(data) is not self._kind:
            raise SummaryError(
                f"feature {self.feature!r}: {kind_name(type(data))} after {kind_name(self._kind)}; a feature "
                f"keeps one kind (values, histogram or categories) for its reference"
            )
        self._kind = type(data)
        if isinstance(data, Values):
            take = data.values[: self.target - self.seen]
            self._values.append(take)
            self.seen += take.size
        elif isinstance(data, Histogram):
            if self._histogram is None:
                self._histogram = data
            else:
                check_edges(self.feature, self._histogram.edges, data.edges, "the reference being learned")
                self._histogram = Histogram(self._histogram.edges, self._histogram.counts + data.counts)
            self.seen += data.count
        else:
            if self._categories is None:
                self._categories = {}
            for name, c in data.counts.items():
                if name in self._categories or len(self._categories) < MAX_CATEGORIES:
                    self._categories[name] = self._categories.get(name, 0) + c
                else:
                    self._other += c
            self._other += data.other
            self.seen += data.count
        if self.seen >= self.target:
            self._freeze()

    def _freeze(self) -> None:
        if self._kind is Values:
            self._reference = numeric_reference(self.feature, np.concatenate(self._values), self.max_values)
            self._values = []
        elif self._kind is Histogram and self._histogram is not None:
            self._reference = histogram_reference(self.feature, self._histogram, self.max_values)
            self._histogram = None
        elif self._categories is not None:
            self._reference = categorical_reference(self.feature, self._categories, self._other)
            self._categories = None


def check_edges(feature: str, expected: np.ndarray, got: np.ndarray, where: str) -> None:
    """Refuse a histogram whose edges are not the ones ``where`` holds counts on (re-binning would guess)."""
    if expected.shape == got.shape and np.array_equal(expected, got):
        return
    if expected.shape != got.shape:
        detail = f"{got.size} edges, {where} has {expected.size}"
    else:
        i = int(np.flatnonzero(expected != got)[0])
        detail = f"bin_edges[{i}] = {got[i]}, {where} has {expected[i]}"
    raise SummaryError(
        f"feature {feature!r}: bin_edges differ from those of {where} ({detail}); send the same bin_edges for a "
        f"feature every time (counts over other edges are refused, not re-binned)"
    )


def kind_name(kind: type) -> str:
    return {Values: "values", Histogram: "a histogram", Categories: "categories"}.get(kind, kind.__name__)
