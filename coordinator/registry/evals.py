"""Evaluations as a model card states them (``model-index``), and the auto-promotion rule that compares them.

The rule: a new version becomes champion when the model has a ``promote_margin``, both it and the champion were
evaluated on the same held-out dataset (same sha256: losses on different data do not compare), and its loss is
below the champion's by at least that fraction. A quantized version has its own rule (``decide_quantized``): it
is judged against its source, within ``quantize_margin``. Every outcome has a reason, kept on the version, so an
operator can see why a version was (not) promoted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import PurePosixPath

from myolo.coordinator.registry.records import (
    IndexDataset,
    IndexMetric,
    IndexResult,
    IndexTask,
    ModelIndex,
    VersionRecord,
)
from myolo.events.payloads.models import EvalResult

TASK = IndexTask(type="text-generation", name="Causal language modeling")
SPLIT = "held-out"


def model_index(model: str, result: EvalResult | None) -> list[ModelIndex]:
    """The held-out evaluation as ``model-index`` (empty without one): its loss (nats per token) and
    perplexity, the dataset by path, with its sha256 as the revision."""
    if result is None:
        return []
    dataset = IndexDataset(
        type=result.dataset,
        name=PurePosixPath(result.dataset).name or result.dataset,
        split=SPLIT,
        revision=result.dataset_sha256,
        args={"tokens": result.tokens},
    )
    metrics = [
        IndexMetric(type="loss", value=result.loss, name="Held-out loss (nats per token)"),
        IndexMetric(type="perplexity", value=result.perplexity, name="Held-out perplexity"),
    ]
    return [ModelIndex(name=model, results=[IndexResult(task=TASK, dataset=dataset, metrics=metrics)])]


def all_metrics(metrics: dict[str, float], result: EvalResult | None) -> dict[str, float]:
    """The numbers a version carries: those given, and the evaluation's loss and perplexity."""
    if result is None:
        return dict(metrics)
    return {**metrics, "loss": result.loss, "perplexity": result.perplexity}


@dataclass(frozen=True)
class HeldOut:
    loss: float
    dataset_sha256: str


def held_out(version: VersionRecord) -> HeldOut | None:
    """The version's held-out loss on a dataset known by its sha256, from its model-index."""
    for entry in version.model_index:
        for result in entry.results:
            loss = next((m.value for m in result.metrics if m.type == "loss"), None)
            if loss is not None and result.dataset.revision:
                return HeldOut(loss, result.dataset.revision)
    return None


@dataclass(frozen=True)
class Promotion:
    promote: bool
    reason: str


def decide(new: VersionRecord, champion: VersionRecord | None, margin: float | None) -> Promotion | None:
    """Whether ``new`` becomes champion on its own, and why (None: the model has no promote_margin)."""
    if margin is None:
        return None
    if champion is None:
        return Promotion(False, "not promoted: the model has no champion to compare with (promote one first)")
    mine, theirs = held_out(new), held_out(champion)
    if mine is None:
        return Promotion(False, "not promoted: no held-out evaluation on a dataset known by its sha256")
    if theirs is None:
        return Promotion(False, f"not promoted: champion v{champion.version} has no held-out evaluation to compare")
    if mine.dataset_sha256 != theirs.dataset_sha256:
        return Promotion(
            False,
            f"not promoted: evaluated on dataset {mine.dataset_sha256[:12]}, champion v{champion.version} on "
            f"{theirs.dataset_sha256[:12]}: losses on different data do not compare",
        )
    better = (theirs.loss - mine.loss) / theirs.loss if theirs.loss > 0 else 0.0
    losses = f"held-out loss {mine.loss:.4f}, champion v{champion.version}'s {theirs.loss:.4f}"
    if mine.loss < theirs.loss and better >= margin:
        return Promotion(
            True,
            f"auto-promoted: {losses} on dataset {mine.dataset_sha256[:12]}: {better:.2%} lower "
            f"(promote_margin {margin:.2%})",
        )
    return Promotion(False, f"not promoted: {losses}: {better:.2%} lower; promote_margin asks {margin:.2%}")


def decide_quantized(
    new: VersionRecord, parent: VersionRecord | None, champion: VersionRecord | None, margin: float | None
) -> Promotion:
    """A quantized version is never promoted by ``promote_margin`` (it is never better, only smaller and
    faster). It becomes champion on its own only when the model has a ``quantize_margin``, its parent is the
    champion, the parent's very bytes were quantized, and its held-out perplexity is within the margin above
    its source's, both measured side by side on the same tokens by the quantization job."""
    q = new.quantization
    assert q is not None
    if margin is None:
        return Promotion(
            False, "not promoted: a quantized version is promoted on its own only within the model's "
            "quantize_margin of its source, and the model has none",
        )  # fmt: skip
    if parent is None:
        return Promotion(False, "not promoted: a quantized version needs its parent (the source) to compare with")
    if champion is None or champion.version != parent.version:
        now = f"v{champion.version} is" if champion is not None else "there is none"
        return Promotion(False, f"not promoted: its source v{parent.version} is not the champion ({now})")
    if q.source_sha256 != parent.sha256:
        return Promotion(
            False,
            f"not promoted: it was quantized from bytes {str(q.source_sha256)[:12]}, not v{parent.version}'s "
            f"{parent.sha256[:12]}",
        )
    mine, source = held_out(new), q.source_eval
    if mine is None or source is None or source.dataset_sha256 is None:
        return Promotion(False, "not promoted: no side-by-side held-out evaluation of it and its source")
    if mine.dataset_sha256 != source.dataset_sha256:
        return Promotion(False, "not promoted: it and its source were evaluated on different data")
    ppl = math.exp(min(mine.loss, 700.0))
    worse = ppl / source.perplexity - 1 if source.perplexity > 0 else math.inf
    said = (
        f"held-out perplexity {ppl:.4f}, its source v{parent.version}'s {source.perplexity:.4f} on the same "
        f"tokens ({mine.dataset_sha256[:12]}): {worse:+.2%}"
    )
    if worse <= margin:
        return Promotion(True, f"auto-promoted: {said} (quantize_margin {margin:.2%})")
    return Promotion(False, f"not promoted: {said}; quantize_margin allows {margin:.2%}")
