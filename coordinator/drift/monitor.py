"""The drift monitor of one (model, version): feeds traffic into windows, learns references, evaluates.

``observe`` puts each feature of a ``DriftSample`` into its window, and into its reference learner while the
feature has no reference (each feature learns from its own first ``reference_count`` values, so a feature
that appears late learns late, and one that never reaches the count never holds the others up). Every
``every_s`` (on multiples of it, like the windows' buckets) ``evaluate`` compares every window with its
reference and counts the drifted evaluations in a row.

One drift gives one detection: when the count reaches ``consecutive`` the model's drift is detected, the
count restarts at 0, and evaluations do not count again until the window has fully turned over (``window_s``
after the detection), so the traffic that was detected is never counted twice. A drift that persists is
therefore detected again ``window_s + (consecutive - 1) * every_s`` later (70 minutes by default): whoever acts
on detections (a retraining job per model at a time) decides what a repeat means. An evaluation in which no
feature could be evaluated (no references yet, too little traffic) is no evidence either way: it leaves the
count as it was.

Bounded: at most 256 features per model (``MAX_FEATURES``); a sample naming more is refused feature by feature,
and a feature's bad data never stops the others of its sample.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from typing import NamedTuple

import msgspec
import numpy as np

from myolo.coordinator.drift.reference import Reference, ReferenceLearner, SummaryError, parse_summary
from myolo.coordinator.drift.rule import DriftRule, Evaluation, evaluate
from myolo.coordinator.drift.window import FeatureWindow
from myolo.events.payloads.external import DriftSample
from myolo.events.payloads.models import MAX_FEATURES

_TOLERANCE = 1e-9  # of every_s: a time on an evaluation boundary is on it


class Observed(msgspec.Struct, kw_only=True):
    """What ``observe`` did with a sample's features: those taken, and those refused with the reason."""

    accepted: list[str] = []
    refused: dict[str, str] = {}


class Step(NamedTuple):
    """One evaluation's effect on the streak: drifted evaluations in a row (counting it), and whether it made
    the drift detected."""

    consecutive: int
    detected: bool


class Streak:
    """Drifted evaluations in a row; a detection when they reach ``consecutive``, then quiet for ``window_s``.

    Pure (time is given), so the benchmark counts false alarms with the very rule the monitor uses.
    """

    def __init__(self, consecutive: int, window_s: float) -> None:
        self.consecutive, self.window_s = consecutive, window_s
        self.count = 0
        self.detections = 0
        self.quiet_until = -math.inf

    def update(self, drifted: bool | None, now: float) -> Step:
        """``drifted``: the evaluation's verdict; None when nothing could be evaluated (the count stays)."""
        if drifted is None:
            return Step(self.count, False)
        if now < self.quiet_until - _TOLERANCE * self.window_s:
            self.count = 0  # the window still holds traffic of the last detection
            return Step(0, False)
        self.count = self.count + 1 if drifted else 0
        if self.count < self.consecutive:
            return Step(self.count, False)
        reached, self.count = self.count, 0
        self.detections += 1
        self.quiet_until = now + self.window_s
        return Step(reached, True)


class _Feature:
    def __init__(self, window: FeatureWindow, learner: ReferenceLearner | None) -> None:
        self.window, self.learner = window, learner


class Monitor:
    """Drift of one version of a model. ``references``: given ones (restored from the state topic, or set
    from a file); any other feature learns its own from traffic."""

    def __init__(
        self,
        model: str,
        version: str,
        rule: DriftRule | None = None,
        *,
        references: Mapping[str, Reference] | None = None,
        seed: int = 0,
    ) -> None:
        self.model, self.version = model, version
        self.rule = rule or DriftRule()
        self.seed = seed
        self._references: dict[str, Reference] = dict(references or {})
        if len(self._references) > MAX_FEATURES:
            raise ValueError(f"references: {len(self._references)} features, over {MAX_FEATURES} per model")
        self._features: dict[str, _Feature] = {}
        self._streak = Streak(self.rule.consecutive, self.rule.window_s)
        self._next_at: float | None = None

    @property
    def references(self) -> dict[str, Reference]:
        """Every feature's reference so far (given, or learned and frozen): what to store."""
        return dict(self._references)

    @property
    def learning(self) -> list[str]:
        """Features still learning their reference."""
        return sorted(name for name, f in self._features.items() if f.learner is not None)

    @property
    def consecutive(self) -> int:
        return self._streak.count

    @property
    def detections(self) -> int:
        return self._streak.detections

    def observe(self, sample: DriftSample, now: float) -> Observed:
        """Feed the sample's features (at ``now``) into their windows, and learners while they learn."""
        if sample.model != self.model or (sample.version is not None and sample.version != self.version):
            raise ValueError(
                f"model: a sample of {sample.model!r} version {sample.version!r} given to the monitor of "
                f"{self.model!r} version {self.version!r}; route samples by model and version"
            )
        if self._next_at is None:
            self._next_at = self._next_after(now)
        out = Observed()
        for name, summary in sample.features.items():
            feature = self._features.get(name)
            if feature is None:
                if len(self._features) >= MAX_FEATURES:
                    out.refused[name] = f"feature {name!r}: this model already has {MAX_FEATURES} features tracked"
                    continue
                feature = self._features[name] = self._new_feature(name)
            try:
                data = parse_summary(name, summary)
                feature.window.add(data, now)
                if feature.learner is not None:
                    feature.learner.add(data)
                    if feature.learner.reference is not None:
                        self._references[name] = feature.learner.reference
                        feature.learner = None
            except SummaryError as exc:
                out.refused[name] = str(exc)
                continue
            out.accepted.append(name)
        return out

    def due(self, now: float) -> bool:
        """Whether an evaluation is due at ``now`` (every ``every_s``, from the first sample on)."""
        return self._next_at is not None and now >= self._next_at - _TOLERANCE * self.rule.every_s

    def evaluate(self, now: float) -> Evaluation | None:
        """The evaluation due at ``now``, with the streak counted; None when none is due. A late call does
        one evaluation, not one per period missed."""
        if not self.due(now):
            return None
        self._next_at = self._next_after(now)
        windows = {name: f.window.snapshot(now) for name, f in self._features.items()}
        result = evaluate(self._references, windows, self.rule)
        step = self._streak.update(result.drifted if result.evaluated else None, now)
        result.at, result.window_start, result.window_end = now, now - self.rule.window_s, now
        result.consecutive, result.detected = step
        return result

    def _new_feature(self, name: str) -> _Feature:
        seed = int(np.random.SeedSequence([self.seed, zlib.crc32(name.encode())]).generate_state(1)[0])
        window = FeatureWindow(name, self.rule.window_s, self.rule.buckets, self.rule.bucket_values, seed)
        learner = None if name in self._references else ReferenceLearner(name, self.rule.reference_count)
        return _Feature(window, learner)

    def _next_after(self, now: float) -> float:
        every = self.rule.every_s
        return (math.floor(now / every + _TOLERANCE) + 1) * every
