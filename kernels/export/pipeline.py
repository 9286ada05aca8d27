"""One export, as both the trainer's rank 0 and an operator's ``python -m myolo.kernels.cli.export`` run it:
consolidate the checkpoint, check it against the model, write the safetensors file, evaluate that file,
and write the manifest beside it last (its presence means the rest is complete)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
import torch

from myolo.common.digest import sha256_file
from myolo.events.payloads.models import EvalResult, ModelExport, Watermark
from myolo.kernels.export.consolidate import consolidate
from myolo.kernels.export.evaluate import evaluate
from myolo.kernels.export.manifest import write_manifest
from myolo.kernels.export.weights import (
    check_compatible,
    describe_model,
    load_weights,
    weights_metadata,
    write_weights,
)
from myolo.kernels.model import GPT, ModelConfig, preset
from myolo.kernels.watermark.header import with_watermark

log = structlog.get_logger("myolo.kernels.export")

HASH_CHUNK = 8 << 20  # the data file is read in chunks this large, a heartbeat after each


@dataclass(frozen=True)
class ExportSpec:
    """What the export needs besides the checkpoint: the model it holds, and how to evaluate it."""

    model: str = "tiny"
    model_args: dict[str, Any] = field(default_factory=dict)
    seq_len: int = 64
    eval_data: str | None = None  # held-out token file; None: no evaluation
    eval_batches: int = 16
    eval_rows: int = 8  # sequences per held-out batch
    data_dtype: str = "uint16"
    data_path: str | None = None  # the training data, checksummed into the manifest
    init_from: str | None = None  # recorded in the manifest
    device: str = "cpu"
    watermark: Watermark | None = None  # the mark training embedded: named in the file's header and manifest

    def model_config(self) -> ModelConfig:
        return preset(self.model, **self.model_args)

    @property
    def model_label(self) -> str:
        return describe_model(self.model, self.model_args)


def _absolute(path: str | None) -> str | None:
    return str(Path(path).resolve()) if path else None


def expected_shapes(cfg: ModelConfig) -> dict[str, torch.Size]:
    """The full model's tensor names and shapes, from a model on the meta device (nothing allocated)."""
    with torch.device("meta"):
        model = GPT(cfg)
    return {name: t.shape for name, t in model.state_dict().items()}


def evaluate_file(weights: Path, spec: ExportSpec, on_progress: Callable[[], None] | None = None) -> EvalResult:
    """Build the full model (no parallelism) from the written file and evaluate it on ``spec.eval_data``."""
    assert spec.eval_data is not None
    cfg = spec.model_config()
    device = torch.device(spec.device)
    with torch.device(device):
        model = GPT(cfg)
    load_weights(model, weights, spec.model_label)
    return evaluate(
        model,
        spec.eval_data,
        seq_len=spec.seq_len,
        rows=spec.eval_rows,
        batches=spec.eval_batches,
        dtype=spec.data_dtype,
        vocab_size=cfg.vocab_size,
        device=device,
        on_batch=on_progress,
    )


def export_checkpoint(
    checkpoint: str | os.PathLike[str],
    output: str | os.PathLike[str],
    spec: ExportSpec,
    *,
    expect_step: int | None = None,
    on_progress: Callable[[], None] | None = None,
) -> ModelExport:
    """Export the checkpoint at ``checkpoint`` (a step directory or a checkpoint root) to ``output`` and
    ``<output>.json``; ``on_progress`` runs between the long parts (a trainer's heartbeat)."""
    tick = on_progress or (lambda: None)
    out = Path(output)
    full = consolidate(checkpoint)
    if expect_step is not None and full.step != expect_step:
        raise ValueError(f"checkpoint {full.source} holds step {full.step}, not the final step {expect_step}")
    check_compatible(
        expected_shapes(spec.model_config()),
        {n: t.shape for n, t in full.weights.items()},
        f"checkpoint {full.source}",
        spec.model_label,
    )
    tick()
    step = full.step
    metadata = with_watermark(weights_metadata(spec.model, step, spec.model_args), spec.watermark)
    written = write_weights(full.weights, out, metadata)
    del full  # the model's full copy in host memory; evaluation reads the file back
    tick()
    result = evaluate_file(written.path, spec, tick) if spec.eval_data else None
    data_sha = sha256_file(spec.data_path, chunk=HASH_CHUNK, each=lambda _: tick()).sha256 if spec.data_path else None
    export = ModelExport(
        artifact=str(written.path.resolve()),
        sha256=written.sha256,
        size_bytes=written.size_bytes,
        model=spec.model,
        steps=step,
        data_sha256=data_sha,
        eval=result,
        init_from=_absolute(spec.init_from),
        watermark=spec.watermark,
    )
    manifest = write_manifest(export, written.path)
    log.info(
        "model exported",
        artifact=export.artifact,
        manifest=str(manifest),
        sha256=export.sha256,
        size_bytes=export.size_bytes,
        step=export.steps,
        eval_loss=result.loss if result else None,
        eval_tokens=result.tokens if result else None,
    )
    return export
