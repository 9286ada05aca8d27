"""Fused softmax cross-entropy, forward and backward, for (tokens, vocab) logits.

Why fused: the unfused path materialises log-softmax (tokens x vocab, often the largest activation of an
LLM) and reads it again for the loss and the gradient. Here the forward streams over each row once with an
online max/log-sum-exp and keeps only one fp32 number per row; the backward recomputes softmax from the
logits and that number and writes the gradient directly.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _fwd_kernel(LOGITS, TARGETS, LOSS, LSE, stride, V, ignore_index, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = LOGITS + row * stride
    target = tl.load(TARGETS + row)
    m = tl.full([], float("-inf"), tl.float32)
    s = tl.full([], 0.0, tl.float32)
    for start in range(0, V, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        x = tl.load(base + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    lse = m + tl.log(s)
    tl.store(LSE + row, lse)
    # Out-of-range targets are masked (no out-of-bounds read); the caller validates them when it can.
    valid = (target != ignore_index) & (target >= 0) & (target < V)
    x_t = tl.load(base + target, mask=valid, other=0.0).to(tl.float32)
    tl.store(LOSS + row, tl.where(valid, lse - x_t, 0.0))


@triton.jit
def _bwd_kernel(LOGITS, TARGETS, LSE, SCALE, DLOGITS, stride, dstride, V, ignore_index, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    target = tl.load(TARGETS + row)
    valid = (target != ignore_index) & (target >= 0) & (target < V)
    scale = tl.where(valid, tl.load(SCALE).to(tl.float32), 0.0)
    lse = tl.load(LSE + row)
    for start in range(0, V, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        mask = cols < V
        x = tl.load(LOGITS + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        g = tl.exp(x - lse) - tl.where(cols == target, 1.0, 0.0)
        tl.store(DLOGITS + row * dstride + cols, (g * scale).to(DLOGITS.dtype.element_ty), mask=mask)


def _block(v: int) -> int:
    return min(triton.next_power_of_2(v), 4096)


class _CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, targets, ignore_index):
        logits = logits.contiguous()
        targets = targets.contiguous()
        m, v = logits.shape
        loss = torch.empty(m, device=logits.device, dtype=torch.float32)
        lse = torch.empty(m, device=logits.device, dtype=torch.float32)
        _fwd_kernel[(m,)](logits, targets, loss, lse, logits.stride(0), v, ignore_index, BLOCK_V=_block(v))
        # Count on the device: no host sync. Zero valid targets gives nan, as torch's mean reduction does.
        n_valid = (targets != ignore_index).sum().to(torch.float32)
        ctx.save_for_backward(logits, targets, lse, n_valid)
        ctx.ignore_index = ignore_index
        return (loss.sum() / n_valid).to(logits.dtype)

    @staticmethod
    def backward(ctx, grad):
        logits, targets, lse, n_valid = ctx.saved_tensors
        m, v = logits.shape
        scale = (grad.to(torch.float32) / n_valid).reshape(1)
        dlogits = torch.empty_like(logits)
        args = (logits, targets, lse, scale, dlogits, logits.stride(0), dlogits.stride(0), v, ctx.ignore_index)
        _bwd_kernel[(m,)](*args, BLOCK_V=_block(v))
        return dlogits, None, None


def fused_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Mean softmax cross-entropy over targets != ignore_index; logits (tokens, vocab), targets (tokens,)."""
    if logits.dim() != 2 or targets.dim() != 1 or targets.shape[0] != logits.shape[0]:
        raise ValueError(
            f"cross_entropy expects logits (tokens, vocab) and targets (tokens,); got "
            f"{tuple(logits.shape)} and {tuple(targets.shape)}"
        )
    return _CrossEntropy.apply(logits, targets, ignore_index)
