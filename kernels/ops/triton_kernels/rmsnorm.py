"""Fused residual-add + RMSNorm, forward and backward, as one autograd.Function.

Why fused: a pre-norm block does `h = x + residual; y = rms_norm(h)`. Unfused that is three passes over
the activations (add, then the norm's read and write); fused it is one read of x and residual and one write
of y and h. The backward also recomputes from the saved h and the per-row 1/rms instead of keeping fp32
intermediates, and reduces the weight gradient per program before a short torch sum.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

MAX_FUSED_BYTES = 65536  # one row must fit in one program's block


@triton.jit
def _fwd_kernel(
    X, R, W, Y, H, RSTD,
    stride_x, stride_r, stride_y, stride_h,
    N, eps,
    HAS_RESIDUAL: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    h = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        r = tl.load(R + row * stride_r + cols, mask=mask, other=0.0).to(tl.float32)
        # Round the sum to the storage dtype before normalising, so forward, backward and the returned
        # residual all see the same h (what the unfused `x + residual` would produce).
        h = (h + r).to(H.dtype.element_ty)
        tl.store(H + row * stride_h + cols, h, mask=mask)
        h = h.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / N + eps)
    tl.store(RSTD + row, rstd)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * stride_y + cols, (h * rstd * w).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _bwd_kernel(
    DY, DH_OUT, H, W, RSTD, DH, DW_PART,
    stride_dy, stride_dho, stride_h, stride_dh,
    M, N, rows_per_program,
    HAS_DH_OUT: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK_N], dtype=tl.float32)
    # int64 bounds make the loop index int64 when compiled, so row * stride cannot overflow.
    first = pid.to(tl.int64) * rows_per_program
    last = tl.minimum(first + rows_per_program, M)
    for row64 in range(first, last):
        h = tl.load(H + row64 * stride_h + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(DY + row64 * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(RSTD + row64)
        hn = h * rstd
        wdy = w * dy
        # d/dh of w*h*rstd: rstd * (w*dy - hn * mean(w*dy*hn))
        dh = (wdy - hn * (tl.sum(wdy * hn, axis=0) / N)) * rstd
        if HAS_DH_OUT:
            dh += tl.load(DH_OUT + row64 * stride_dho + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(DH + row64 * stride_dh + cols, dh.to(DH.dtype.element_ty), mask=mask)
        dw += dy * hn
    tl.store(DW_PART + pid * N + cols, dw, mask=mask)


def _launch_shape(n: int, element_size: int) -> tuple[int, int]:
    block = triton.next_power_of_2(n)
    if block * element_size > MAX_FUSED_BYTES:
        raise ValueError(
            f"fused RMSNorm: hidden size {n} is too large for one Triton block "
            f"(max {MAX_FUSED_BYTES // element_size} elements for this dtype); use the native backend"
        )
    return block, min(max(block // 256, 1), 16)


def _as_rows(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1, t.shape[-1]).contiguous()


def _row_programs(m: int, device: torch.device) -> int:
    if device.type == "cuda":
        return min(m, 4 * torch.cuda.get_device_properties(device).multi_processor_count)
    return min(m, 8)


class _ResidualRMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, residual, weight, eps):
        shape = x.shape
        x2 = _as_rows(x)
        r2 = _as_rows(residual) if residual is not None else x2
        m, n = x2.shape
        block, warps = _launch_shape(n, x2.element_size())
        y = torch.empty_like(x2)
        h = torch.empty_like(x2) if residual is not None else x2
        rstd = torch.empty(m, device=x.device, dtype=torch.float32)
        _fwd_kernel[(m,)](
            x2, r2, weight, y, h, rstd,
            x2.stride(0), r2.stride(0), y.stride(0), h.stride(0),
            n, eps,
            HAS_RESIDUAL=residual is not None, BLOCK_N=block, num_warps=warps,
        )  # fmt: skip
        ctx.save_for_backward(h, weight, rstd)
        ctx.has_residual = residual is not None
        ctx.shape = shape
        return y.view(shape), h.view(shape)

    @staticmethod
    def backward(ctx, dy, dh_out):
        h, weight, rstd = ctx.saved_tensors
        m, n = h.shape
        dy2 = _as_rows(dy)
        has_dh_out = dh_out is not None  # h is x itself without a residual: its gradient still flows
        dho2 = _as_rows(dh_out) if has_dh_out else dy2
        dh = torch.empty_like(h)
        block, warps = _launch_shape(n, h.element_size())
        programs = _row_programs(m, h.device)
        rows_per_program = triton.cdiv(m, programs)
        dw_part = torch.empty((programs, n), device=h.device, dtype=torch.float32)
        _bwd_kernel[(programs,)](
            dy2, dho2, h, weight, rstd, dh, dw_part,
            dy2.stride(0), dho2.stride(0), h.stride(0), dh.stride(0),
            m, n, rows_per_program,
            HAS_DH_OUT=has_dh_out, BLOCK_N=block, num_warps=warps,
        )  # fmt: skip
        dw = dw_part.sum(0).to(weight.dtype)
        dh = dh.view(ctx.shape)
        d_residual = dh if ctx.has_residual else None
        return dh, d_residual, dw, None


def fused_residual_rms_norm(
    x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (rms_norm(x + residual) * weight, x + residual); with residual None, (rms_norm(x), x)."""
    if residual is not None and residual.shape != x.shape:
        raise ValueError(f"residual shape {tuple(residual.shape)} must equal x shape {tuple(x.shape)}")
    return _ResidualRMSNorm.apply(x, residual, weight, eps)
