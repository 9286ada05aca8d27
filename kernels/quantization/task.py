"""A job whose ``task`` is ``quantize``: one worker turns ``init_from`` into ``export_path`` and its manifest.

The same pipeline as ``python -m myolo.kernels.cli.quantize`` (``pipeline.quantize_file``) with the job's fields:
``calib_path`` and ``eval_data_path`` (read with ``seq_len``, ``eval_batches`` of ``global_batch`` rows, in
``data_dtype``), ``quant_bits``, ``quant_scheme``, ``quant_group_size``, ``calib_sequences``. The source is
checked against ``init_from_sha256`` first. An export names its own model (``model`` and ``model_args`` are
read only for a checkpoint directory). Each step of the work heartbeats to the agent, which otherwise
takes a silent worker for a hung one; the manifest at ``<export_path>.json`` is what the agent attaches to
the job's completion, and what the coordinator registers.
"""

from __future__ import annotations

import os

import structlog

from myolo.kernels.quantization.pipeline import QuantizeSpec, quantize_file
from myolo.kernels.train.config import JobConfig
from myolo.kernels.train.data_check import check_inputs_sha256
from myolo.kernels.train.loop import Control

log = structlog.get_logger("myolo.kernels.quantization")


def spec_of(job: JobConfig) -> QuantizeSpec:
    assert job.checkpoint.init_from is not None and job.checkpoint.export_path is not None  # JobConfig.validate's rules
    return QuantizeSpec(
        source=job.checkpoint.init_from,
        output=job.checkpoint.export_path,
        bits=job.quantization.bits,
        scheme=job.quantization.scheme,
        group_size=job.quantization.group_size,
        calib=job.quantization.calib_path,
        eval_data=job.data.eval_path,
        # an export names its own model; a checkpoint directory is read as the job's model
        model=job.model.name if os.path.isdir(job.checkpoint.init_from) else None,
        model_args=dict(job.model.args) if os.path.isdir(job.checkpoint.init_from) else {},
        calib_sequences=job.quantization.calib_sequences,
        seq_len=job.data.seq_len,
        eval_batches=job.data.eval_batches,
        eval_rows=job.data.global_batch,
        data_dtype=job.data.dtype,
        device="cuda" if job.runtime.device == "cuda" else "cpu",
    )


def run_quantize(job: JobConfig, control: Control) -> None:
    """Quantize, heartbeating as it goes; raises what the pipeline raises (the job then fails with it)."""
    job.validate(1)
    control.heartbeat(0, True)
    check_inputs_sha256(job, 0)

    def progress(text: str) -> None:
        log.info("quantize", step=text)
        control.heartbeat(0, True)

    try:
        export = quantize_file(spec_of(job), progress)
    finally:
        control.close()
    log.info(
        "quantization job done", artifact=export.artifact, perplexity=export.eval.perplexity if export.eval else None
    )
