"""One optimizer step's forward/backward, global-norm clipping and the loss every rank agrees on."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import loss_parallel

from myolo.kernels import ops
from myolo.kernels.parallel.parallelize import ParallelModel


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over all positions of a (micro)batch, computed in fp32."""
    return ops.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


@contextlib.contextmanager
def compute_context(pm: ParallelModel, autocast_dtype: torch.dtype | None, device_type: str) -> Iterator[None]:
    """loss_parallel when logits are vocab-sharded; autocast when no FSDP policy casts parameters."""
    with contextlib.ExitStack() as stack:
        if pm.loss_parallel:
            stack.enter_context(loss_parallel())
        if autocast_dtype is not None:
            stack.enter_context(torch.autocast(device_type, dtype=autocast_dtype))
        yield


def _plain(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if isinstance(t, DTensor) else t


def forward_backward(
    pm: ParallelModel,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    n_microbatches: int,
    autocast_dtype: torch.dtype | None = None,
) -> torch.Tensor | None:
    """Accumulate gradients of this replica's rows; the mean microbatch loss, or None off the last stage.

    Each microbatch loss is a mean over equally many tokens, so scaling each by 1/n makes the gradient
    that of the whole replica batch (pipelining applies the same 1/n itself via ``scale_grads``).
    """
    device_type = inputs.device.type
    with compute_context(pm, autocast_dtype, device_type):
        if pm.schedule is not None:
            losses: list[torch.Tensor] = []
            kwargs = {"target": targets, "losses": losses} if pm.has_last else {}
            args = (inputs,) if pm.has_first else ()
            pm.schedule.step(*args, **kwargs)
            return torch.stack([_plain(x).detach().float() for x in losses]).mean() if pm.has_last else None
        model = pm.parts[0]
        total = torch.zeros((), device=inputs.device)
        pairs = zip(inputs.chunk(n_microbatches), targets.chunk(n_microbatches), strict=True)
        for i, (x, y) in enumerate(pairs):
            if pm.fsdp:
                # Reduce-scatter only after the last microbatch; earlier ones accumulate locally.
                model.set_requires_gradient_sync(i == n_microbatches - 1)
            loss = lm_loss(model(x), y)
            (loss / n_microbatches).backward()
            total += _plain(loss).detach().float()
        return total / n_microbatches


def clip_global_norm(params: list[torch.nn.Parameter], max_norm: float, pp_group: dist.ProcessGroup | None) -> float:
    """Clip by the norm over *all* parameters of the model, across TP/FSDP shards and pipeline stages.

    DTensor gradients give their norm over the tp/dp mesh; stages hold disjoint parameters, so their
    squared norms add up over the pp group. Clipping each stage by its own norm would be wrong.
    """
    grads = [p.grad for p in params if p.grad is not None]
    if grads:
        norm = _plain(torch.nn.utils.get_total_norm(grads, 2.0, foreach=True)).float()
    else:
        norm = torch.zeros((), device=params[0].device if params else "cpu")
    if pp_group is not None:
        sq = norm.pow(2)
        dist.all_reduce(sq, group=pp_group)
        norm = sq.sqrt()
    if max_norm > 0 and grads:
        torch.nn.utils.clip_grads_with_norm_(params, max_norm, norm.to(grads[0].device), foreach=True)
    return float(norm)
