"""What a run sets up once before its first step: mesh, model, optimizers, checkpoints, data.

Kept apart from the loop so each piece can be built (and tested) alone: ``setup`` and ``build_model`` are also
what a test uses to look at one rank's parameter shards without training.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch.optim.lr_scheduler import LambdaLR

from myolo.kernels import ops
from myolo.kernels.data import TokenSource, open_source
from myolo.kernels.export.preflight import check_export_inputs
from myolo.kernels.export.weights import WeightsError, describe_model, load_weights
from myolo.kernels.model import GPT, ModelConfig
from myolo.kernels.model.flops import peak_flops
from myolo.kernels.parallel.mesh import MeshInfo, build_mesh, init_distributed, pick_device, pin_nccl_algo
from myolo.kernels.parallel.parallelize import ParallelModel, parallelize
from myolo.kernels.train import determinism
from myolo.kernels.train.config import JobConfig, JobConfigError
from myolo.kernels.train.data_check import check_inputs_sha256
from myolo.kernels.train.guards import open_defense, open_watermark
from myolo.kernels.train.staleness import LocalSGD
from myolo.kernels.train.step import lm_loss

if TYPE_CHECKING:
    from myolo.kernels.checkpoint import Checkpointer
    from myolo.kernels.defense.exchange import SparseExchange
    from myolo.kernels.watermark.mark import DigitalWatermark


@dataclass
class Session:
    """This rank's share of a run, as the per-step functions need it."""

    job: JobConfig
    info: MeshInfo
    dtype: torch.dtype
    cfg: ModelConfig
    pm: ParallelModel
    n_params: int
    backends: dict[str, str]  # resolved per op at start
    optimizers: list[torch.optim.Optimizer]
    schedulers: list[LambdaLR]
    params: list[torch.nn.Parameter]  # of every part, for clipping and local SGD
    local_sgd: LocalSGD
    defense: SparseExchange | None  # the compressed data-parallel exchange, or None: the dense one
    watermark: DigitalWatermark | None  # the mark embedded while training, or None
    checkpointer: Checkpointer | None
    start: int  # the last step already done (0, or the step resumed from)
    source: TokenSource
    peak_flops: float | None

    @property
    def autocast(self) -> torch.dtype | None:
        """Autocast to the run's dtype only when no FSDP policy casts the parameters already."""
        return self.dtype if (self.dtype != torch.float32 and not self.pm.fsdp) else None

    @property
    def is_reporter(self) -> bool:
        """Rank 0 writes the run's records (start, steps, end)."""
        return self.info.rank == 0

    @property
    def replica_reporter(self) -> bool:
        """One rank per data-parallel replica holds its loss and reports its progress to the agent."""
        return self.pm.has_last and self.info.tp_rank == 0

    @property
    def world_group(self) -> dist.ProcessGroup | None:
        return dist.group.WORLD if self.info.mesh is not None else None


def lr_lambda(job: JobConfig) -> Callable[[int], float]:
    """Linear warm-up, then cosine decay to ``min_lr_ratio`` of the peak at the last step."""

    def factor(i: int) -> float:
        if job.optimizer.warmup_steps and i < job.optimizer.warmup_steps:
            return (i + 1) / job.optimizer.warmup_steps
        span = max(1, job.optimizer.steps - job.optimizer.warmup_steps)
        progress = min(1.0, (i - job.optimizer.warmup_steps) / span)
        return job.optimizer.min_lr_ratio + (1 - job.optimizer.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


def setup(job: JobConfig) -> tuple[MeshInfo, torch.dtype]:
    determinism.apply(
        job.runtime.deterministic, job.runtime.seed
    )  # before any CUDA call: cuBLAS reads its workspace setting once
    device = pick_device(job.runtime.device, int(os.environ.get("LOCAL_RANK", "0")))
    pin_nccl_algo(job.runtime.nccl_algo)
    rank, world = init_distributed(device)
    job.validate(world)
    info = build_mesh(job.layout(), device, rank, world)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    return info, dtype


def build_model(job: JobConfig, info: MeshInfo, dtype: torch.dtype, use_fsdp: bool) -> tuple[ParallelModel, int]:
    """The full model, identically seeded on every rank (or loaded from ``init_from``), cut and sharded into this
    rank's parts.

    ``init_from`` is loaded into the full model before it is cut and sharded, so one file starts any layout; a
    checkpoint resumed later (``open_checkpointer``) overwrites it, which is what "start from these weights when
    there is no checkpoint to resume" means."""
    torch.manual_seed(job.runtime.seed)
    with torch.device(info.device):
        model = GPT(job.model_config())
    if job.checkpoint.init_from is not None:
        try:
            load_weights(model, job.checkpoint.init_from, describe_model(job.model.name, job.model.args))
        except WeightsError as exc:
            raise JobConfigError.at("checkpoint.init_from", str(exc)) from None
    n_params = model.num_params()
    pm = parallelize(
        model,
        info,
        stages_per_rank=job.parallelism.stages_per_rank,
        n_microbatches=job.n_microbatches(),
        schedule=job.parallelism.schedule,
        loss_fn=lm_loss,
        use_fsdp=use_fsdp,
        param_dtype=dtype,
        compile_blocks=job.runtime.compile,
    )
    return pm, n_params


def make_optimizers(job: JobConfig, pm: ParallelModel) -> tuple[list[torch.optim.Optimizer], list[LambdaLR]]:
    """One AdamW and its learning-rate schedule per model part (pipeline stage) this rank holds."""
    betas = (job.optimizer.beta1, job.optimizer.beta2)
    opts = [
        ops.make_adamw(list(p.parameters()), job.optimizer.lr, betas, 1e-8, job.optimizer.weight_decay)
        for p in pm.parts
    ]
    return opts, [LambdaLR(o, lr_lambda(job)) for o in opts]


def open_checkpointer(
    job: JobConfig, pm: ParallelModel, opts: list[torch.optim.Optimizer], scheds: list[LambdaLR]
) -> tuple[Checkpointer | None, int]:
    """The checkpointer when the job saves or snapshots, and the step to continue after (0: from scratch)."""
    if not (job.checkpoint.dir or job.checkpoint.snapshot_every):
        return None, 0
    from myolo.kernels.checkpoint import Checkpointer  # distributed checkpointing: only for runs that save

    ckpt = Checkpointer(
        job.checkpoint.dir,
        job.checkpoint.every,
        pm.parts,
        opts,
        snapshot_every=job.checkpoint.snapshot_every,
        extra={f"lr_scheduler_{i}": s for i, s in enumerate(scheds)},
        job_id=job.job_id,
    )
    return ckpt, (ckpt.load_latest() or 0) if job.checkpoint.resume else 0


def prepare(job: JobConfig) -> Session:
    """Join the mesh and build everything the steps use, resuming from the latest checkpoint when asked."""
    info, dtype = setup(job)
    check_export_inputs(job, info.rank)
    check_inputs_sha256(job, info.rank)
    device = info.device
    cfg = job.model_config()
    backends = ops.configure(prefer=job.runtime.ops_prefer or None, device=device.type, dtype=dtype)
    local_sgd = LocalSGD(job.parallelism.sync_every, info.layout.dp, info.group("dp"))
    watermark = open_watermark(job)
    # the defense replaces FSDP's reduce-scatter with its own exchange: each replica holds whole parameters
    pm, n_params = build_model(job, info, dtype, use_fsdp=not local_sgd.enabled and job.defense.kind == "none")
    defense = open_defense(job, pm, info)
    opts, scheds = make_optimizers(job, pm)
    ckpt, start = open_checkpointer(job, pm, opts, scheds)
    source = open_source(
        job.data.path, cfg.vocab_size, job.data.global_batch, job.data.seq_len, job.runtime.seed, job.data.dtype
    )
    peak = peak_flops(torch.cuda.get_device_name(device) if device.type == "cuda" else None)
    return Session(
        job=job,
        info=info,
        dtype=dtype,
        cfg=cfg,
        pm=pm,
        n_params=n_params,
        backends=dict(backends or {}),
        optimizers=opts,
        schedulers=scheds,
        params=pm.parameters(),
        local_sgd=local_sgd,
        defense=defense,
        watermark=watermark,
        checkpointer=ckpt,
        start=start,
        source=source,
        peak_flops=peak,
    )
