"""Sparsify one replica's gradient with error feedback: what it sends each step, and what it keeps for later.

Deep Gradient Compression (Lin et al. 2018), per tensor: the gradient is added to a local momentum ``u``
(momentum correction; ``momentum = 0`` is plain error feedback) and ``u`` to an accumulator ``v``; the
``keep`` share of ``v``'s coordinates leave, and leave ``v`` and ``u`` (momentum factor masking). Nothing is
dropped: what is not sent this step is sent later, so over steps the sum of what was sent plus ``v`` is the
sum of every ``u``.

Which coordinates leave is where the defense is. Most tensors send their largest ``|v|`` (top-k), indices
with values. The tensors indexed by the vocabulary (the input embedding and the output head) never do: their
rows are non-zero, or largest, exactly for the tokens of the batch (the input embedding's gradient is zero
in every other row; the head's is largest in the targets' rows), so the indices top-k picks there would
name the batch's tokens whatever ``keep`` is. Their rows leave by a draw that every replica makes alike from
(seed, step, tensor) and that depends on no data: the indices carry nothing and are not even sent, and the
values of one step show a token only if the draw happened to pick its row (a ``vocab_keep`` chance, ``keep``
unless set apart: a larger share trains the embedding faster and shows that share of the batch's tokens).

``warmup_steps`` > 0 ramps the top-k tensors' share geometrically from all of it at step 0 to ``keep`` at
that step (DGC's sparsity warm-up): the first steps' large, fast-changing gradients then leave whole instead
of lingering in ``v``. The vocabulary tensors stay at ``vocab_keep`` throughout, so the token set is as hidden
during the warm-up as after it; the other tensors are not, which is the price (docs/defense.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

VOCAB_TENSORS = ("tok_embeddings.weight", "output.weight")


@dataclass(frozen=True)
class Sent:
    """One replica's message for one step: top-k coordinates (flat offsets into the concatenation of the
    top-k tensors) with their values, and the drawn rows' values (rows known to every replica)."""

    indices: torch.Tensor  # int32 (k_total,)
    values: torch.Tensor  # float32 (k_total,)
    rows: torch.Tensor  # float32 (rows_total,): the drawn rows of each vocabulary tensor, flattened, in order

    @property
    def nbytes(self) -> int:
        return self.indices.numel() * 4 + self.values.numel() * 4 + self.rows.numel() * 4


@dataclass
class _Slot:
    name: str
    param: torch.nn.Parameter
    vocab: bool
    count: int  # coordinates (top-k) or rows (vocabulary) sent per step
    offset: int  # of a top-k tensor in the flat index space
    u: torch.Tensor | None
    v: torch.Tensor


def _local(t: torch.Tensor, like: torch.Tensor | None = None) -> torch.Tensor:
    """A DTensor's local shard (tensor parallelism: each dp group exchanges its own shard), else itself; a
    gradient is first laid out as its parameter (``like``) is, which it need not be."""
    if not hasattr(t, "to_local"):
        return t
    if like is not None and hasattr(like, "placements") and t.placements != like.placements:
        t = t.redistribute(t.device_mesh, like.placements)
    return t.to_local()


class Compressor:
    """The sparsifier of one replica's parameters (its local shards under tensor parallelism)."""

    def __init__(
        self,
        named: list[tuple[str, torch.nn.Parameter]],
        keep: float,
        momentum: float = 0.0,
        seed: int = 0,
        warmup_steps: int = 0,
        vocab_keep: float | None = None,
    ) -> None:
        if not 0 < keep <= 1:
            raise ValueError(f"defense keep share must be in (0, 1], got {keep}")
        if not 0 <= momentum < 1:
            raise ValueError(f"defense momentum must be in [0, 1), got {momentum}")
        if warmup_steps < 0:
            raise ValueError(f"defense warm-up steps must be >= 0, got {warmup_steps}")
        vocab_keep = keep if vocab_keep is None else vocab_keep
        if not 0 < vocab_keep <= 1:
            raise ValueError(f"defense vocabulary share must be in (0, 1], got {vocab_keep}")
        self.keep, self.momentum, self.seed, self.warmup_steps = keep, momentum, seed, warmup_steps
        self.vocab_keep = vocab_keep
        self.slots: list[_Slot] = []
        offset = 0
        for name, p in named:
            local = _local(p.data)
            vocab = name.endswith(VOCAB_TENSORS) and local.ndim == 2
            size = local.shape[0] if vocab else local.numel()
            count = max(1, math.ceil((vocab_keep if vocab else keep) * size))
            u = torch.zeros_like(local, dtype=torch.float32) if momentum > 0 else None
            self.slots.append(_Slot(name, p, vocab, count, offset, u, torch.zeros_like(local, dtype=torch.float32)))
            offset += 0 if vocab else local.numel()
        self.flat_size = offset
        self.dense_bytes = sum(_local(s.param.data).numel() * 4 for s in self.slots)

    def keep_at(self, step: int) -> float:
        """The share of a top-k tensor's coordinates that leave at ``step`` (``keep`` after the warm-up)."""
        if self.warmup_steps <= 0 or step >= self.warmup_steps:
            return self.keep
        return self.keep ** (max(step, 0) / self.warmup_steps)

    def drawn_rows(self, slot: _Slot, step: int) -> torch.Tensor:
        """The rows of a vocabulary tensor that leave at ``step``: the same draw on every replica."""
        index = self.slots.index(slot)
        gen = torch.Generator().manual_seed((self.seed * 1_000_003 + step) * 1_009 + index)
        return torch.randperm(slot.v.shape[0], generator=gen)[: slot.count].sort().values

    @torch.no_grad()
    def compress(self, step: int) -> Sent:
        """Fold this step's gradients (``param.grad``) in and take out what leaves."""
        indices, values, rows = [], [], []
        share = self.keep_at(step)
        for slot in self.slots:
            grad = slot.param.grad
            g = torch.zeros_like(slot.v) if grad is None else _local(grad, slot.param.data).float()
            if slot.u is not None:
                slot.u.mul_(self.momentum).add_(g)
                slot.v.add_(slot.u)
            else:
                slot.v.add_(g)
            if slot.vocab:
                picked = self.drawn_rows(slot, step).to(slot.v.device)
                rows.append(slot.v[picked].reshape(-1).clone())
                slot.v[picked] = 0
                if slot.u is not None:
                    slot.u[picked] = 0
                continue
            flat = slot.v.view(-1)
            count = slot.count if share == self.keep else max(1, math.ceil(share * flat.numel()))
            top = flat.abs().topk(count, sorted=False).indices
            values.append(flat[top].clone())
            indices.append((top + slot.offset).to(torch.int32))
            flat[top] = 0
            if slot.u is not None:
                slot.u.view(-1)[top] = 0
        device = self.slots[0].v.device if self.slots else torch.device("cpu")

        def cat(parts: list[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
            return torch.cat(parts) if parts else torch.zeros(0, dtype=dtype, device=device)

        return Sent(cat(indices, torch.int32), cat(values, torch.float32), cat(rows, torch.float32))

    @torch.no_grad()
    def install(self, messages: list[Sent], step: int) -> None:
        """Set every parameter's gradient to the mean of the replicas' ``messages`` (dense, zeros elsewhere)."""
        n = len(messages)
        device = self.slots[0].v.device if self.slots else torch.device("cpu")
        flat = torch.zeros(self.flat_size, dtype=torch.float32, device=device)
        for m in messages:
            flat.index_add_(0, m.indices.to(device=device, dtype=torch.int64), m.values.to(device))
        row_sum = torch.stack([m.rows.to(device) for m in messages]).sum(0) if messages else None
        at = 0
        for slot in self.slots:
            local = torch.zeros_like(slot.v)
            if slot.vocab:
                width = slot.v[0].numel()
                assert row_sum is not None
                part = row_sum[at : at + slot.count * width].view(slot.count, *slot.v.shape[1:])
                local[self.drawn_rows(slot, step).to(device)] = part
                at += slot.count * width
            else:
                local.view(-1).copy_(flat[slot.offset : slot.offset + local.numel()])
            local.div_(n)
            grad = local.to(slot.param.dtype)
            if hasattr(slot.param.data, "to_local"):
                from torch.distributed.tensor import DTensor

                grad = DTensor.from_local(grad, slot.param.device_mesh, slot.param.placements, run_check=False)
            slot.param.grad = grad

    def residual(self) -> dict[str, torch.Tensor]:
        """What is still to be sent, per tensor (the accumulators ``v``)."""
        return {s.name: s.v for s in self.slots}
