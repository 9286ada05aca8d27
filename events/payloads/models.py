"""Model life-cycle events the coordinator publishes: drift found, a version registered, an alias moved; and
the export a finished training job leaves behind (carried by its completion event).

They go to ``myolo.models`` keyed by model name, so one model's history stays in order on one partition.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from myolo.events.payloads.common import Id, NonNegFloat, NonNegInt, Payload
from myolo.events.payloads.external import Sha256

PathOrUrl = Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]
Text = Annotated[str, msgspec.Meta(max_length=2000)]
# a model or alias name: what `models:/name@alias` and the registry's keys are made of
ModelName = Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]
AliasName = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z][A-Za-z0-9_-]*$")]
MAX_FEATURES = 256
MAX_METRICS = 64


class EvalResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One evaluation on a held-out set: loss (mean cross-entropy per token, nats) and perplexity = exp(loss)."""

    dataset: PathOrUrl
    dataset_sha256: Sha256 | None = None
    tokens: NonNegInt
    loss: float
    perplexity: NonNegFloat


QuantScheme = Literal["dynamic_fixed_point", "rtn", "gptq", "hqq"]


class Quantization(msgspec.Struct, kw_only=True, omit_defaults=True):
    """How a quantized model was made from its source: the scheme and grid, how many linear layers, the
    calibration set's SHA-256, the source's, and the source's evaluation on the same held-out set (its
    ``dataset_sha256`` is the quantized model's own ``eval``'s), so the two compare."""

    scheme: QuantScheme
    bits: Annotated[int, msgspec.Meta(ge=2, le=8)]
    group_size: NonNegInt  # 0: one group per row
    layers: NonNegInt
    bits_per_weight: NonNegFloat  # of the quantized layers, scales and zeros included
    calib_sha256: Sha256 | None = None
    calib_tokens: NonNegInt = 0
    source_sha256: Sha256 | None = None
    source_eval: EvalResult | None = None


class Watermark(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """That a model carries a keyed watermark, and how to read it: a commitment to the key (never the key,
    ``myolo.common.keys.watermark_commitment``) and the mark's settings, which are not secret."""

    commitment: Sha256
    bits: Annotated[int, msgspec.Meta(ge=16, le=4096)]
    share: Annotated[float, msgspec.Meta(gt=0, le=1)]
    max_coords: Annotated[int, msgspec.Meta(ge=1024)]
    margin: Annotated[float, msgspec.Meta(gt=0, le=10)]


class ModelExport(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What a finished job exported: consolidated weights (safetensors) with their checksum, the training
    data's checksum and the held-out evaluation. Written beside the artifact as ``<artifact>.json`` by the
    trainer's rank 0; the agent attaches it to the completion event."""

    artifact: PathOrUrl
    sha256: Sha256
    size_bytes: NonNegInt
    model: Annotated[str, msgspec.Meta(max_length=64)]  # the trainer's model preset ("tiny")
    steps: NonNegInt
    data_sha256: Sha256 | None = None  # None: synthetic data
    eval: EvalResult | None = None
    init_from: PathOrUrl | None = None  # the weights training started from
    quantization: Quantization | None = None  # set: a quantized model, ``init_from`` its source
    watermark: Watermark | None = None  # set: the weights carry a mark (a quantized model: its source's)


class FeatureDrift(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One feature's statistics over a window against its reference; ``drifted`` after correction."""

    feature: Id
    kind: Literal["numeric", "categorical"]
    count: NonNegInt  # values in the window
    psi: NonNegFloat | None = None
    ks: NonNegFloat | None = None
    ks_p: NonNegFloat | None = None
    wasserstein: NonNegFloat | None = None  # Wasserstein-1 over the reference's standard deviation
    chi2: NonNegFloat | None = None
    chi2_p: NonNegFloat | None = None
    js: NonNegFloat | None = None  # Jensen-Shannon distance, base 2 (0..1)
    drifted: bool = False
    by: Annotated[list[Annotated[str, msgspec.Meta(max_length=32)]], msgspec.Meta(max_length=8)] = []


class DriftDetected(Payload, kw_only=True):
    """``ai.myolo.drift.detected.v1``: a model's production data drifted past its rule for ``windows``
    consecutive evaluations (the share of drifted features over ``share_threshold``)."""

    detection_id: Id
    model: ModelName
    version: Id
    window_start: float
    window_end: float
    windows: NonNegInt
    drifted_share: NonNegFloat
    share_threshold: NonNegFloat
    features: Annotated[list[FeatureDrift], msgspec.Meta(max_length=MAX_FEATURES)]
    retraining_job: Id | None = None  # the job submitted for it, when one was


class ModelRegistered(Payload, kw_only=True):
    """``ai.myolo.model.registered.v1``: a new version of a model is in the registry."""

    model: ModelName
    version: NonNegInt
    artifact: PathOrUrl
    sha256: Sha256
    job: Id | None = None
    generation: NonNegInt | None = None
    parent: NonNegInt | None = None
    drift_event: Id | None = None
    metrics: Annotated[dict[Id, float], msgspec.Meta(max_length=MAX_METRICS)] = {}
    by: Id = "auto"
    watermark: Watermark | None = None


class ModelAliasSet(Payload, kw_only=True):
    """``ai.myolo.model.alias.v1``: an alias of a model now points at ``version`` (None: removed)."""

    model: ModelName
    alias: AliasName
    version: NonNegInt | None
    previous: NonNegInt | None = None
    by: Id
    reason: Text = ""


class GateResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One health gate of a rollout wave: its figures and whether it passed (``None``: no data to judge)."""

    gate: Annotated[str, msgspec.Meta(max_length=32)]  # health, faults, leak, throughput, upgrade
    passed: bool | None
    detail: Text = ""
    figures: Annotated[dict[Id, float], msgspec.Meta(max_length=MAX_METRICS)] = {}


class RolloutPhaseChanged(Payload, kw_only=True):
    """``ai.myolo.rollout.phase.v1``: a rolling upgrade changed phase or wave (written to its state first)."""

    rollout: Id
    component: Id
    version: Id
    phase: Annotated[str, msgspec.Meta(max_length=32)]
    wave: NonNegInt | None = None
    waves: NonNegInt = 0
    reason: Text = ""
    by: Id = "auto"
    gates: Annotated[list[GateResult], msgspec.Meta(max_length=16)] = []
