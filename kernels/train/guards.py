"""The model-security pieces a run may carry: the defended gradient exchange and the watermark's regulariser."""

from __future__ import annotations

import functools

import torch

from myolo.common.errors import ConfigError
from myolo.kernels.defense.compress import Compressor
from myolo.kernels.defense.exchange import SparseExchange
from myolo.kernels.model import GPT, ModelConfig
from myolo.kernels.parallel.mesh import MeshInfo
from myolo.kernels.parallel.parallelize import ParallelModel
from myolo.kernels.train.config import JobConfig, JobConfigError
from myolo.kernels.watermark.mark import DigitalWatermark


def open_defense(job: JobConfig, pm: ParallelModel, info: MeshInfo) -> SparseExchange | None:
    """The compressed exchange over this rank's data-parallel group, when the job asks for it."""
    if job.defense.kind == "none":
        return None
    named = [(name, p) for part in pm.parts for name, p in part.named_parameters()]
    compressor = Compressor(
        named,
        job.defense.param,
        job.defense.momentum,
        seed=job.runtime.seed,
        warmup_steps=job.defense.warmup_steps,
        vocab_keep=job.defense.vocab_param,
    )
    return SparseExchange(compressor, info.group("dp"), info.layout.dp)


def open_watermark(job: JobConfig) -> DigitalWatermark | None:
    """The mark of the job's key file; the key is read here and kept in this process only."""
    if job.watermark.key_file is None:
        return None
    try:
        return DigitalWatermark.from_key_file(job.watermark.key_file)
    except ConfigError as exc:
        raise JobConfigError.at("watermark.key_file", exc.reason) from None


def add_watermark_gradient(mark: DigitalWatermark, pm: ParallelModel, info: MeshInfo, cfg: ModelConfig) -> float:
    """Backpropagate the mark's regulariser into the gradients the step accumulated; returns its value. Under
    pipelining each stage sums the carriers it holds and the stages add their sums up (a collective: every
    rank calls it every step; the backward is local)."""
    if info.layout.pp == 1:
        loss = mark.loss(pm.parts[0])
    else:
        loss = mark.loss(_full_shape(cfg), parts=pm.parts, group=info.group("pp"))
    if loss.requires_grad:  # a pipeline stage that holds no carrier has no gradient to add
        loss.backward()
    return float(loss.detach())


@functools.cache
def _full_shape(cfg: ModelConfig) -> GPT:
    """The whole model on the meta device: which weights carry the mark is decided on the whole model."""
    with torch.device("meta"):
        return GPT(cfg)
