"""A feature's sliding window over production traffic: the last ``window_s`` seconds, in time buckets.

Time is split into buckets of ``window_s / buckets`` seconds (aligned to multiples of that length, so every
feature and every coordinator cuts time the same way). A bucket is dropped once it starts more than
``window_s`` before ``now``: the window covers between ``window_s - bucket`` and ``window_s`` seconds, and
old data leaves it a bucket at a time, not all at once.

Memory is bounded whatever the traffic. Raw values: each bucket keeps a uniform random sample of at most
``max_bucket_values`` of its values (bottom-k sampling: every value gets a random key from the window's seeded
generator, a bucket keeps the smallest keys, so the same traffic always gives the same sample); histograms:
one count per bin per bucket; categories: counts per bucket, at most 1,000 distinct names in the window (a
name first seen after that is pooled into ``other``).

A histogram with edges other than the window's is refused (:class:`SummaryError`), not re-binned: moving
counts between bins means guessing where in a bin the values were, which distorts KS and PSI exactly where
drift shows. The window takes the new edges once the counts on the old ones have all left it, so a producer
that changes its bins loses at most one window of that feature. A feature's kind (values, histogram,
categories) is fixed the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from myolo.coordinator.drift.reference import (
    Categories,
    FeatureData,
    Histogram,
    SummaryError,
    Values,
    check_edges,
    kind_name,
)
from myolo.events.payloads.external import MAX_CATEGORIES

DEFAULT_BUCKET_VALUES = 1000
_TOLERANCE = 1e-9  # of a bucket's length: a time on a bucket boundary belongs to the bucket it starts


@dataclass
class _ValueBucket:
    values: np.ndarray = field(default_factory=lambda: np.empty(0))
    keys: np.ndarray = field(default_factory=lambda: np.empty(0))
    seen: int = 0

    @property
    def full(self) -> bool:
        return self.seen > self.values.size


@dataclass
class _CategoryBucket:
    counts: dict[str, int] = field(default_factory=dict)
    other: int = 0


_Bucket = _ValueBucket | np.ndarray | _CategoryBucket


class FeatureWindow:
    """One feature's window. ``add`` data as it arrives with its ``now``; ``snapshot(now)`` for evaluation."""

    def __init__(
        self,
        feature: str,
        window_s: float,
        buckets: int = 6,
        max_bucket_values: int = DEFAULT_BUCKET_VALUES,
        seed: int = 0,
    ) -> None:
        if not window_s > 0:
            raise ValueError(f"window_s: {window_s}; a window must last more than 0 s")
        if not 1 <= buckets <= 1000:
            raise ValueError(f"buckets: {buckets}; use 1..1000")
        if max_bucket_values < 1:
            raise ValueError(f"max_bucket_values: {max_bucket_values}; keep at least 1 value per bucket")
        self.feature, self.window_s, self.buckets = feature, window_s, buckets
        self.bucket_s = window_s / buckets
        self.max_bucket_values = max_bucket_values
        self._rng = np.random.default_rng(seed)
        self._buckets: dict[int, _Bucket] = {}
        self._kind: type | None = None
        self._edges: np.ndarray | None = None
        self._names: dict[str, int] = {}  # category -> buckets holding it

    @property
    def kind(self) -> type | None:
        """``Values``, ``Histogram`` or ``Categories`` while the window holds data; None when empty."""
        return self._kind

    def add(self, data: FeatureData, now: float) -> None:
        """Put ``data`` in the bucket of ``now``. Refuses (``SummaryError``) another kind than the window holds,
        or a histogram over other edges; nothing is added then."""
        self._evict(now)
        if data.count == 0:
            return
        if self._kind is not None and type(data) is not self._kind:
            raise SummaryError(
                f"feature {self.feature!r}: {kind_name(type(data))} while the window holds "
                f"{kind_name(self._kind)}; a feature keeps one kind (the window takes another once it is empty)"
            )
        if isinstance(data, Histogram) and self._edges is not None:
            check_edges(self.feature, self._edges, data.edges, "the window")
        index = self._index(now)
        if isinstance(data, Values):
            self._add_values(index, data.values)
        elif isinstance(data, Histogram):
            self._edges = data.edges
            bucket = self._buckets.get(index)
            self._buckets[index] = data.counts.copy() if bucket is None else bucket + data.counts
        else:
            self._add_categories(index, data)
        self._kind = type(data)
        while len(self._buckets) > self.buckets + 1:  # only a clock that went back leaves more
            self._drop(min(self._buckets))

    def count(self, now: float) -> int:
        """Values in the window at ``now`` (all of them, not only those sampled)."""
        self._evict(now)
        return sum(_bucket_count(b) for b in self._buckets.values())

    def snapshot(self, now: float) -> FeatureData | None:
        """The window's data at ``now``; None when it is empty.

        Raw values come back as a uniform random sample of the whole window (``Values.count`` is the true
        count): a bucket that saw more values than it keeps is sampled at a lower rate than a quiet one, so
        the sample is every value whose key is at most the smallest "largest kept key" of the full buckets,
        a threshold under which every bucket still has all its values.
        """
        self._evict(now)
        if not self._buckets:
            return None
        parts = [self._buckets[i] for i in sorted(self._buckets)]
        if self._kind is Values:
            vb = [b for b in parts if isinstance(b, _ValueBucket)]
            tau = min((float(b.keys.max()) for b in vb if b.full), default=math.inf)
            sample = np.concatenate([b.values[b.keys <= tau] for b in vb])
            return Values(sample, sum(b.seen for b in vb))
        if self._kind is Histogram and self._edges is not None:
            counts = np.sum([b for b in parts if isinstance(b, np.ndarray)], axis=0)
            return Histogram(self._edges, counts)
        merged: dict[str, int] = {}
        other = 0
        for b in parts:
            if isinstance(b, _CategoryBucket):
                for name, c in b.counts.items():
                    merged[name] = merged.get(name, 0) + c
                other += b.other
        return Categories(merged, other)

    # ---- buckets ---------------------------------------------------------------------------------------

    def _index(self, now: float) -> int:
        return math.floor(now / self.bucket_s + _TOLERANCE)

    def _evict(self, now: float) -> None:
        first = math.ceil((now - self.window_s) / self.bucket_s - _TOLERANCE)  # buckets starting >= now - window_s
        for index in [i for i in self._buckets if i < first]:
            self._drop(index)

    def _drop(self, index: int) -> None:
        bucket = self._buckets.pop(index)
        if isinstance(bucket, _CategoryBucket):
            for name in bucket.counts:
                self._names[name] -= 1
                if not self._names[name]:
                    del self._names[name]
        if not self._buckets:
            self._kind, self._edges = None, None

    def _add_values(self, index: int, values: np.ndarray) -> None:
        bucket = self._buckets.get(index)
        if not isinstance(bucket, _ValueBucket):
            bucket = self._buckets[index] = _ValueBucket()
        keys = self._rng.random(values.size)
        all_values = np.concatenate([bucket.values, values])
        all_keys = np.concatenate([bucket.keys, keys])
        if all_keys.size > self.max_bucket_values:
            keep = np.argpartition(all_keys, self.max_bucket_values - 1)[: self.max_bucket_values]
            all_values, all_keys = all_values[keep], all_keys[keep]
        bucket.values, bucket.keys = all_values, all_keys
        bucket.seen += values.size

    def _add_categories(self, index: int, data: Categories) -> None:
        bucket = self._buckets.get(index)
        if not isinstance(bucket, _CategoryBucket):
            bucket = self._buckets[index] = _CategoryBucket()
        for name, c in data.counts.items():
            if name not in bucket.counts:
                if name not in self._names and len(self._names) >= MAX_CATEGORIES:
                    bucket.other += c
                    continue
                self._names[name] = self._names.get(name, 0) + 1
                bucket.counts[name] = 0
            bucket.counts[name] += c
        bucket.other += data.other


def _bucket_count(bucket: _Bucket) -> int:
    if isinstance(bucket, _ValueBucket):
        return bucket.seen
    if isinstance(bucket, np.ndarray):
        return int(bucket.sum())
    return sum(bucket.counts.values()) + bucket.other
