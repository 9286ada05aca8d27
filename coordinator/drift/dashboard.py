"""What the dashboard shows of drift: per monitored model version, its features' statistics over its recent
evaluations (a bounded ring of the status records as they come, newest last) and its detections; each
evaluation that drifted goes to the events timeline."""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterator

import msgspec

from myolo.coordinator.core.dashboard import Moment
from myolo.coordinator.drift.records import StatusRecord
from myolo.events.payloads.models import FeatureDrift

POINTS = 120  # evaluations kept per model version
MAX_VERSIONS = 1000  # model versions kept (the one evaluated longest ago goes first)


class DriftPoint(msgspec.Struct, kw_only=True, frozen=True):
    time: float  # the end of the evaluated window
    share: float
    drifted: bool
    features: list[FeatureDrift]


class VersionDrift(msgspec.Struct, kw_only=True, frozen=True):
    model: str
    version: str
    detections: list[str]
    points: list[DriftPoint]


class DriftBoard(msgspec.Struct, kw_only=True, frozen=True):
    items: list[VersionDrift]


class DriftHistory:
    def __init__(self) -> None:
        self.points: OrderedDict[tuple[str, str], deque[DriftPoint]] = OrderedDict()
        self.latest: dict[tuple[str, str], StatusRecord] = {}

    def add(self, rec: StatusRecord) -> None:
        key = (rec.model, rec.version)
        ring = self.points.get(key)
        if ring is None:
            while len(self.points) >= MAX_VERSIONS:
                gone, _ = self.points.popitem(last=False)
                self.latest.pop(gone, None)
            ring = self.points[key] = deque(maxlen=POINTS)
        else:
            self.points.move_to_end(key)
        if ring and ring[-1].time == rec.window_end:
            ring.pop()  # the same evaluation again (replayed, or written again): keep it once
        ring.append(DriftPoint(time=rec.window_end, share=rec.share, drifted=rec.drifted, features=list(rec.features)))
        self.latest[key] = rec

    def board(self) -> DriftBoard:
        items = [
            VersionDrift(model=m, version=v, detections=list(self.latest[(m, v)].detections), points=list(ring))
            for (m, v), ring in sorted(self.points.items())
        ]
        return DriftBoard(items=items)

    def moments(self) -> Iterator[Moment]:
        for (model, version), ring in self.points.items():
            for p in ring:
                if p.drifted:
                    names = ", ".join(f.feature for f in p.features if f.drifted)
                    text = f"version {version} drifted ({p.share:.0%} of features): {names}"
                    yield Moment(time=p.time, kind="drift", subject=model, text=text)
