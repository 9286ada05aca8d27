"""``sync_every H``: local SGD across data-parallel replicas, and the staleness it causes.

In the default synchronous mode (H = 1) gradients enter FSDP's reduce-scatter every step, so staleness
is 0. With H > 1 each replica keeps a full copy of its parameters (no FSDP), takes H optimizer steps on
its own rows, then all replicas average their parameters. ``gradient_staleness`` counts the optimizer
steps since this replica last joined a global reduction: it cycles 1, 2, ..., H-1, 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor


@dataclass
class LocalSGD:
    every: int
    dp: int
    group: dist.ProcessGroup | None
    staleness: int = 0

    @property
    def enabled(self) -> bool:
        return self.every > 1 and self.dp > 1

    def after_step(self, step: int, params: list[torch.nn.Parameter]) -> int:
        """Average parameters when ``step`` closes a period; returns the replica's staleness."""
        if not self.enabled:
            self.staleness = 0
            return 0
        if step % self.every == 0:
            average_parameters(params, self.group, self.dp)
            self.staleness = 0
        else:
            self.staleness = step % self.every
        return self.staleness


@torch.no_grad()
def average_parameters(params: list[torch.nn.Parameter], group: dist.ProcessGroup | None, dp: int) -> None:
    """Mean of each parameter (local shard under TP) over the data-parallel replicas, in place."""
    for p in params:
        local = p.to_local() if isinstance(p, DTensor) else p.data
        dist.all_reduce(local, group=group)  # gloo has no AVG: sum then divide
        local.div_(dp)
