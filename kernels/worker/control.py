"""Control requests as the training loop sees them, and their agreement across ranks.

Why agreement: only rank 0 receives the agent's messages, and a "stop" obeyed by some ranks and not others
would leave the rest waiting in a collective forever. So every step, when an agent is attached, rank 0
broadcasts what it received as a small bit mask and every rank acts on the same request at the same step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

CHECKPOINT_BIT = 1
STOP_BIT = 2


@dataclass(frozen=True)
class ControlRequest:
    """What the loop must do after the current step: save now (``checkpoint``), stop (``stop``), or both
    (a resize: the agent sends "checkpoint" then "stop"; both in one step means save, then stop)."""

    checkpoint: bool = False
    stop: bool = False

    @property
    def kind(self) -> str:
        return "stop" if self.stop else "checkpoint"

    @classmethod
    def from_mask(cls, mask: int) -> ControlRequest | None:
        if not mask:
            return None
        return cls(checkpoint=bool(mask & CHECKPOINT_BIT), stop=bool(mask & STOP_BIT))


def agree(mask: int, group: dist.ProcessGroup | None = None) -> int:
    """Rank 0's ``mask`` on every rank of ``group`` (a no-op outside torch.distributed)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) == 1:
        return mask
    backend = dist.get_backend(group)
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    t = torch.tensor([mask], dtype=torch.int64, device=device)
    dist.broadcast(t, src=dist.get_global_rank(group, 0) if group is not None else 0, group=group)
    return int(t.item())
