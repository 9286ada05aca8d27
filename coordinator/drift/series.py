"""Drift's series for ``GET /metrics``: windows judged and windows judged drifted, per model (every watched
model at 0 until its first window), counted on each coordinator that judges them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any


def series(by_model: Counter[tuple[str, str]], watched: Iterable[str]) -> dict[str, list[tuple[tuple[str, ...], Any]]]:
    models = sorted({*watched, *(m for _, m in by_model)})
    return {
        "myolo_drift_evaluations_total": [((m,), float(by_model[("evaluations", m)])) for m in models],
        "myolo_drift_detections_total": [((m,), float(by_model[("detections", m)])) for m in models],
    }
