"""Apply the parallel plans in torchtitan's order: pipeline cut, TP, compile per block, FSDP last."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from myolo.kernels.model.gpt import GPT
from myolo.kernels.parallel.fsdp import apply_fsdp
from myolo.kernels.parallel.mesh import MeshInfo
from myolo.kernels.parallel.pp import build_schedule, cut_stage, stage_ids
from myolo.kernels.parallel.tp import apply_tp


@dataclass
class ParallelModel:
    """This rank's share of the model and how to run it."""

    parts: list[nn.Module]
    stage_ids: list[int]
    n_stages: int
    schedule: Any | None = None  # a pipelining schedule when pp > 1
    loss_parallel: bool = False  # logits are vocab-sharded DTensors: run the loss under loss_parallel()
    fsdp: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def has_first(self) -> bool:
        return 0 in self.stage_ids

    @property
    def has_last(self) -> bool:
        return self.n_stages - 1 in self.stage_ids

    def parameters(self) -> list[nn.Parameter]:
        return [p for part in self.parts for p in part.parameters()]


def parallelize(
    model: GPT,
    info: MeshInfo,
    *,
    stages_per_rank: int,
    n_microbatches: int,
    schedule: str,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    use_fsdp: bool,
    param_dtype: torch.dtype,
    compile_blocks: bool,
) -> ParallelModel:
    """Turn the full (identically seeded on every rank) model into this rank's parallel parts."""
    layout = info.layout
    # Vocab-sharded loss saves gathering (B, S, V) logits; kept off under pipelining, whose stage
    # outputs must be plain tensors.
    loss_parallel = layout.tp > 1 and layout.pp == 1
    if layout.pp > 1:
        n_stages = layout.pp * stages_per_rank
        ids = stage_ids(info.pp_rank, layout.pp, stages_per_rank)
        parts: list[nn.Module] = [cut_stage(model, sid, n_stages) for sid in ids]
    else:
        n_stages, ids, parts = 1, [0], [model]

    for part in parts:
        if layout.tp > 1:
            apply_tp(part, info.mesh["tp"], loss_parallel=loss_parallel)
        if compile_blocks:
            for block in part.layers.values():
                block.compile()
        if use_fsdp and layout.dp > 1:
            apply_fsdp(part, info.mesh["dp"], param_dtype, pipelined=layout.pp > 1)
        part.to(info.device)

    pm = ParallelModel(parts, ids, n_stages, loss_parallel=loss_parallel, fsdp=use_fsdp and layout.dp > 1)
    if layout.pp > 1:
        pm.schedule = build_schedule(
            parts, ids, n_stages, info.device, info.group("pp"), n_microbatches, loss_fn, schedule
        )
    return pm
