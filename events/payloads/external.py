"""Events that external systems produce: production-traffic drift samples and release announcements."""

from __future__ import annotations

from typing import Annotated

import msgspec

from myolo.events.payloads.common import Id, NonNegInt, Payload

MAX_VALUES = 100_000  # raw values of one feature in one sample (a larger batch is split by its producer)
MAX_BINS = 1000
MAX_CATEGORIES = 1000
Category = Annotated[str, msgspec.Meta(max_length=256)]


class FeatureSummary(Payload, kw_only=True):
    """A feature of production traffic over a window. Numeric: raw ``values``, or a histogram (``counts``
    over ``bin_edges``, one more edge than counts). Categorical: ``categories``, the count of each value."""

    values: Annotated[list[float], msgspec.Meta(max_length=MAX_VALUES)] | None = None
    bin_edges: Annotated[list[float], msgspec.Meta(max_length=MAX_BINS + 1)] | None = None
    counts: Annotated[list[NonNegInt], msgspec.Meta(max_length=MAX_BINS)] | None = None
    categories: Annotated[dict[Category, NonNegInt], msgspec.Meta(max_length=MAX_CATEGORIES)] | None = None


class DriftSample(Payload, kw_only=True):
    """``ai.myolo.drift.sample.v1``: features of production traffic seen by a served model."""

    model: Id
    version: str | None = None
    window_start: str | None = None
    window_end: str | None = None
    count: NonNegInt = 0
    features: Annotated[
        dict[Annotated[str, msgspec.Meta(min_length=1, max_length=256)], FeatureSummary], msgspec.Meta(max_length=256)
    ]


Sha256 = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]


class ReleasePublished(Payload, kw_only=True):
    """``ai.myolo.release.published.v1``: a release pipeline published a version of a component or model."""

    component: Id
    version: Id
    artifact: str
    sha256: Sha256 | None = None
    notes: str | None = None
    channel: str = "stable"
