"""The watermark on model files: mark an export (a new file, with its manifest), check any model file.

A marked export's header names its mark (``header.py``), so a check needs only the file and the key; a file
whose header lost it (an attacker's copy) is checked with the settings given instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from myolo.events.payloads.models import EvalResult, ModelExport, Watermark
from myolo.kernels.watermark.header import file_watermark, with_watermark
from myolo.kernels.watermark.mark import Batch, DigitalWatermark, EmbedReport, Verification, WatermarkSettings
from myolo.kernels.watermark.secret import WatermarkKey


@dataclass(frozen=True)
class EmbedSpec:
    source: str
    output: str
    data: str
    steps: int = 200
    lr: float = 1e-4
    batch: int = 8
    seq_len: int = 256
    seed: int = 0
    data_dtype: str = "uint16"
    eval_data: str | None = None
    eval_batches: int = 16
    eval_rows: int = 8


@dataclass(frozen=True)
class Embedded:
    export: ModelExport
    report: EmbedReport
    source_eval: EvalResult | None


def _batches(spec: EmbedSpec, vocab: int) -> Iterator[Batch]:
    from myolo.kernels.data.tokenfile import TokenFile

    tokens = TokenFile(spec.data, spec.batch, spec.seq_len, seed=spec.seed, dtype=spec.data_dtype, vocab_size=vocab)
    step = 0
    while True:
        yield tokens.global_batch(step)
        step += 1


def embed_file(mark: DigitalWatermark, spec: EmbedSpec, progress: Callable[[str], None] = lambda _: None) -> Embedded:
    """Mark the float export ``spec.source`` by a short fine-tune on ``spec.data`` and write ``spec.output``
    (with its manifest); with ``eval_data`` both are evaluated on the same held-out tokens."""
    from myolo.kernels.export.evaluate import evaluate
    from myolo.kernels.export.manifest import write_manifest
    from myolo.kernels.export.weights import META_STEP, saved_model, write_weights
    from myolo.kernels.infer.load import file_metadata, load_model
    from myolo.kernels.quantization.spec import META_QUANT

    metadata = file_metadata(spec.source)
    if META_QUANT in metadata:
        raise ValueError(f"{spec.source} is a quantized model: mark the float export, then quantize the marked one")
    model, cfg = load_model(spec.source)

    def held_out(which: str) -> EvalResult | None:
        if spec.eval_data is None:
            return None
        progress(f"evaluating the {which} model on {spec.eval_data}")
        return evaluate(
            model, spec.eval_data, seq_len=spec.seq_len, rows=spec.eval_rows, batches=spec.eval_batches,
            dtype=spec.data_dtype, vocab_size=cfg.vocab_size,
        )  # fmt: skip

    before = held_out("source")
    every = max(1, spec.steps // 10)

    def step_done(step: int, task: float, margin: float) -> None:
        if step % every == 0 or step == spec.steps:
            progress(f"step {step}/{spec.steps}: task loss {task:.4f}, weakest bit's margin {margin:+.3f}")

    report = mark.apply(model, _batches(spec, cfg.vocab_size), steps=spec.steps, lr=spec.lr, progress=step_done)
    after = held_out("marked")
    record = mark.record()
    written = write_weights(model.state_dict(), spec.output, with_watermark(metadata, record))
    export = ModelExport(
        artifact=str(Path(spec.output).resolve()),
        sha256=written.sha256,
        size_bytes=written.size_bytes,
        model=saved_model(metadata) or "tiny",
        steps=int(metadata.get(META_STEP, "0")) + spec.steps,
        eval=after,
        init_from=str(Path(spec.source).resolve()),
        watermark=record,
    )
    write_manifest(export, spec.output)
    return Embedded(export, report, before)


def verify_file(
    path: str | os.PathLike[str],
    key: WatermarkKey,
    *,
    reference: str | os.PathLike[str] | None = None,
    settings: WatermarkSettings | None = None,
) -> tuple[Verification, Watermark | None]:
    """Check the model file ``path`` (float or quantized) with ``key``: with the settings its header names,
    else ``settings`` (or the defaults). ``reference``: the owner's export, to undo a permutation first.
    Returns the verification and the header's record."""
    from myolo.kernels.export.weights import read_weights
    from myolo.kernels.infer.load import file_metadata, load_model

    record = file_watermark(file_metadata(path))
    mark = DigitalWatermark.for_record(key, record) if record else DigitalWatermark(key, settings)
    model, _ = load_model(path)
    ref: dict[str, torch.Tensor] | None = read_weights(reference)[0] if reference is not None else None
    return mark.verify(model, ref), record
