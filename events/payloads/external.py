"""Events that external systems produce: production-traffic drift samples and release announcements."""

from __future__ import annotations

from typing import Annotated

import msgspec

from events.payloads.common import Id, NonNegInt, Payload


class FeatureSummary(Payload, kw_only=True):
    """A numeric feature of production traffic over a window: raw values or a histogram over fixed edges."""

    values: list[float] | None = None
    bin_edges: list[float] | None = None
    counts: list[NonNegInt] | None = None


class DriftSample(Payload, kw_only=True):
    """``ai.myolo.drift.sample.v1``: features of production traffic seen by a served model."""

    model: Id
    version: str | None = None
    window_start: str | None = None
    window_end: str | None = None
    count: NonNegInt = 0
    features: dict[str, FeatureSummary]


Sha256 = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]


class ReleasePublished(Payload, kw_only=True):
    """``ai.myolo.release.published.v1``: a release pipeline published a version of a component or model."""

    component: Id
    version: Id
    artifact: str
    sha256: Sha256 | None = None
    notes: str | None = None
    channel: str = "stable"
