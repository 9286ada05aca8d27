"""Quantize a model file end to end: source in, quantized file and its manifest out, both evaluated alike.

The source is an export (``myolo.kernels.export``) or a training checkpoint (exported first, beside the output).
The calibration and evaluation sets are read, checked disjoint (``overlap``), the model converted and saved,
and both the source and the quantized model evaluated on the same held-out tokens, so the manifest
(``<output>.json``, a ``ModelExport`` with its ``quantization``) holds the two perplexities side by side.
What ``python -m myolo.kernels.cli.quantize`` and a quantization job run.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from myolo.common.digest import sha256_file
from myolo.events.payloads.models import EvalResult, ModelExport, Quantization
from myolo.kernels.export.evaluate import evaluate
from myolo.kernels.export.manifest import write_manifest
from myolo.kernels.export.pipeline import ExportSpec, export_checkpoint
from myolo.kernels.export.weights import describe_model
from myolo.kernels.infer.load import file_metadata, load_model, model_of
from myolo.kernels.quantization.calibrate import calibration_set
from myolo.kernels.quantization.convert import PTQConverter
from myolo.kernels.quantization.file import save_quantized
from myolo.kernels.quantization.linear import QuantLinear
from myolo.kernels.quantization.overlap import MAX_SHARED, WINDOW, file_prefix, shared_runs
from myolo.kernels.quantization.spec import DEFAULT_LAYERS
from myolo.kernels.watermark.header import file_watermark

log = structlog.get_logger("myolo.kernels.quantization")


@dataclass(frozen=True)
class QuantizeSpec:
    """Everything one quantization needs; paths are files (a checkpoint ``source`` may be a directory)."""

    source: str
    output: str
    bits: int = 4
    scheme: str = "gptq"
    group_size: int | None = None
    calib: str | None = None
    eval_data: str | None = None
    model: str | None = None  # a checkpoint's preset (an export names its own)
    model_args: dict[str, Any] = field(default_factory=dict)
    layers: tuple[str, ...] = DEFAULT_LAYERS
    calib_sequences: int = 128
    seq_len: int = 256
    eval_batches: int = 16
    eval_rows: int = 8
    data_dtype: str = "uint16"
    device: str = "cpu"


def quantize_file(spec: QuantizeSpec, progress: Callable[[str], None] = lambda _: None) -> ModelExport:
    """Run ``spec``; returns the manifest written to ``<output>.json``. ValueError (or WeightsError) naming
    the input at fault."""
    out = Path(spec.output)
    source = Path(spec.source)
    if source.is_dir():
        if spec.model is None:
            raise ValueError("a checkpoint source needs --model (an export names its own)")
        exported = out.with_name(out.stem + ".source.safetensors")
        progress(f"exporting checkpoint {source} to {exported}")
        export_checkpoint(source, exported, ExportSpec(model=spec.model, model_args=spec.model_args))
        source = exported
    metadata = file_metadata(source)
    name, args = model_of(metadata, spec.model, spec.model_args or None)
    gpt, cfg = load_model(source, model=name, model_args=args)
    source_sha, _ = sha256_file(source)
    steps = int(metadata.get("myolo.step") or 0)
    calib = None
    if spec.calib is not None:
        calib = calibration_set(
            spec.calib,
            vocab_size=cfg.vocab_size,
            max_seq_len=cfg.max_seq_len,
            seq_len=min(spec.seq_len, cfg.max_seq_len),
            max_sequences=spec.calib_sequences,
            dtype=spec.data_dtype,
        )
    if calib is not None and spec.eval_data is not None:
        seq = min(spec.seq_len, cfg.max_seq_len)
        _check_disjoint(spec, calib.sha256, calib.sequences, spec.eval_batches * spec.eval_rows * (seq + 1))
    progress(f"quantizing {describe_model(name, args)} with {spec.scheme} at {spec.bits} bits")
    conv = PTQConverter(
        model=gpt,
        calib_dataset=calib,
        bit_width=spec.bits,
        scheme=spec.scheme,
        group_size=spec.group_size,
        layers=spec.layers,
        calib_sequences=spec.calib_sequences,
        calib_seq_len=spec.seq_len,
        model_name=name,
        model_args=args,
        source_sha256=source_sha,
        progress=progress,
        device=spec.device,
    )
    quant = conv.convert()
    assert conv.spec is not None
    qspec = conv.spec
    mark = file_watermark(metadata)  # a marked source's mark survives quantization: the file keeps naming it
    written = save_quantized(quant, qspec, out, step=steps, watermark=mark)
    progress(f"wrote {written.path} ({written.size_bytes} bytes)")
    evals: dict[str, EvalResult | None] = {"source": None, "quantized": None}
    if spec.eval_data is not None:
        for label, model in (("source", gpt), ("quantized", quant)):
            evals[label] = evaluate(
                model.to(spec.device),
                spec.eval_data,
                seq_len=min(spec.seq_len, cfg.max_seq_len),
                rows=spec.eval_rows,
                batches=spec.eval_batches,
                dtype=spec.data_dtype,
                vocab_size=cfg.vocab_size,
                device=spec.device,
            )
            progress(f"{label}: held-out perplexity {evals[label].perplexity:.4f}")  # type: ignore[union-attr]
    layers = [m for m in quant.modules() if isinstance(m, QuantLinear)]
    bits_total = sum(m.weight().bytes() * 8 for m in layers)
    weights_total = sum(m.in_features * m.out_features for m in layers)
    export = ModelExport(
        artifact=str(written.path.resolve()),
        sha256=written.sha256,
        size_bytes=written.size_bytes,
        model=name,
        steps=steps,
        eval=evals["quantized"],
        init_from=str(source.resolve()),
        quantization=Quantization(
            scheme=qspec.scheme,
            bits=qspec.bits,
            group_size=qspec.group_size,
            layers=len(layers),
            bits_per_weight=bits_total / max(1, weights_total),
            calib_sha256=qspec.calib_sha256,
            calib_tokens=qspec.calib_tokens,
            source_sha256=source_sha,
            source_eval=evals["source"],
        ),
        watermark=mark,
    )
    write_manifest(export, written.path)
    log.info("model quantized", artifact=export.artifact, scheme=qspec.scheme, bits=qspec.bits)
    return export


def _check_disjoint(spec: QuantizeSpec, calib_sha256: str, sequences: int, eval_tokens: int) -> None:
    """Refuse an evaluation set that is (or was cut from) the calibration tokens; log what little they share."""
    assert spec.calib is not None and spec.eval_data is not None
    if os.path.realpath(spec.calib) == os.path.realpath(spec.eval_data) or (
        calib_sha256 == sha256_file(spec.eval_data)[0]
    ):
        raise ValueError(f"--calib and --eval are the same data ({spec.eval_data}): evaluate on held-out tokens")
    window = spec.seq_len + 1  # both readers take consecutive windows of seq_len + 1 from the file's start
    calib = file_prefix(spec.calib, sequences * window, spec.data_dtype)
    held = file_prefix(spec.eval_data, eval_tokens, spec.data_dtype)
    hits, total = shared_runs([calib], [held])
    log.info("calibration and evaluation overlap", shared_runs=hits, runs=total, window=WINDOW)
    if total and hits / total > MAX_SHARED:
        raise ValueError(
            f"the calibration set {spec.calib} and the evaluation set {spec.eval_data} share {hits} of {total} runs "
            f"of {WINDOW} tokens ({hits / total:.0%}): cut them from different parts of the data"
        )
