"""Pipeline parallelism: cut the GPT into stages and drive them with a pipelining schedule.

Stage ``s`` of ``S`` keeps a contiguous run of blocks (as even as possible, earlier stages take the
remainder); the first stage keeps the embedding, the last the final norm and output. With ``v`` stages
per rank (interleaved 1F1B) rank ``r`` holds stages r, r+pp, r+2pp, ... which is the order the
interleaved schedules expect.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import nn
from torch.distributed import ProcessGroup
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleInterleaved1F1B

from myolo.kernels.model.gpt import GPT
from myolo.kernels.parallel.layout import SCHEDULES


def layer_ranges(n_layers: int, n_stages: int) -> list[range]:
    if n_stages > n_layers:
        raise ValueError(
            f"{n_stages} pipeline stages but only {n_layers} layers: lower pp (or stages_per_rank) "
            "or raise model.n_layers"
        )
    base, extra = divmod(n_layers, n_stages)
    out, start = [], 0
    for s in range(n_stages):
        size = base + (1 if s < extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


def stage_ids(pp_rank: int, pp: int, stages_per_rank: int) -> list[int]:
    return [pp_rank + i * pp for i in range(stages_per_rank)]


def cut_stage(model: GPT, stage: int, n_stages: int) -> GPT:
    """A copy of ``model`` holding only what stage ``stage`` computes; parameter names unchanged."""
    part = copy.deepcopy(model)
    keep = {str(i) for i in layer_ranges(model.cfg.n_layers, n_stages)[stage]}
    for name in list(part.layers.keys()):
        if name not in keep:
            del part.layers[name]
    if stage != 0:
        part.tok_embeddings = None
    if stage != n_stages - 1:
        part.norm = None
        part.output = None
    return part


def build_schedule(
    parts: list[nn.Module],
    ids: list[int],
    n_stages: int,
    device: torch.device,
    group: ProcessGroup,
    n_microbatches: int,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    kind: str,
):
    """The schedule object whose ``step`` runs forward+backward of all microbatches of a step."""
    stages = [PipelineStage(part, sid, n_stages, device, group=group) for part, sid in zip(parts, ids, strict=True)]
    if kind == "1f1b":
        if len(stages) != 1:
            raise ValueError("schedule '1f1b' runs one stage per rank; set stages_per_rank=1")
        return Schedule1F1B(stages[0], n_microbatches, loss_fn=loss_fn)
    if kind == "interleaved1f1b":
        return ScheduleInterleaved1F1B(stages, n_microbatches, loss_fn=loss_fn)
    raise ValueError(f"unknown pipeline schedule {kind!r}; choose one of {SCHEDULES}")
