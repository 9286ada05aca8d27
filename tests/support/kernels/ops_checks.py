"""Shared numerics checks for the ops tests: run one backend and the reference on the same inputs and
compare outputs and gradients with a per-dtype tolerance. Imported by test_ops_*.py (also in subprocesses).
"""

from __future__ import annotations

import torch

# Max |a - b| relative to max |reference|: fp32 kernels differ only in summation order; bf16/fp16 by
# rounding of inputs/outputs (bf16 has 8 mantissa bits, ~4e-3 per rounding, several roundings per op).
TOLERANCE = {torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


def assert_close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    a, e = actual.detach().float(), expected.detach().float()
    assert a.shape == e.shape, f"{what}: shape {tuple(a.shape)} != {tuple(e.shape)}"
    assert torch.isfinite(a).all() == torch.isfinite(e).all(), f"{what}: non-finite mismatch"
    scale = max(e.abs().max().item(), 1e-6)
    err = (a - e).abs().max().item() / scale
    assert err <= TOLERANCE[dtype], f"{what}: relative error {err:.3g} > {TOLERANCE[dtype]} ({dtype})"


def _leaves(*tensors: torch.Tensor) -> list[torch.Tensor]:
    return [t.detach().clone().requires_grad_(True) for t in tensors]


def _grads(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t.grad for t in tensors]


def run_op(op: str, impl, dtype: torch.dtype, seed: int = 0) -> list[tuple[str, torch.Tensor]]:
    """Outputs and input gradients of `impl` for `op` on seeded inputs, as (name, tensor) pairs."""
    g = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(dtype)

    if op in ("rms_norm", "layer_norm", "residual_rms_norm"):
        n = 96  # not a power of two: exercises masking in fused kernels
        x, r, w, b = _leaves(randn(3, 5, n), randn(3, 5, n), randn(n) * 0.5 + 1, randn(n) * 0.1)
        up = randn(3, 5, n)
        if op == "rms_norm":
            y = impl(x, w, 1e-5)
            (y.float() * up.float()).sum().backward()
            return [("y", y), ("dx", x.grad), ("dw", w.grad)]
        if op == "layer_norm":
            y = impl(x, w, b, 1e-5)
            (y.float() * up.float()).sum().backward()
            return [("y", y), ("dx", x.grad), ("dw", w.grad), ("db", b.grad)]
        y, h = impl(x, r, w, 1e-5)
        up_h = randn(3, 5, n)
        ((y.float() * up.float()).sum() + (h.float() * up_h.float()).sum()).backward()
        return [("y", y), ("h", h), ("dx", x.grad), ("dres", r.grad), ("dw", w.grad)]
    if op == "cross_entropy":
        (logits,) = _leaves(randn(12, 203) * 3)
        targets = torch.randint(0, 203, (12,), generator=g)
        targets[[2, 7]] = -100
        loss = impl(logits, targets, -100)
        loss.backward()
        return [("loss", loss.reshape(1)), ("dlogits", logits.grad)]
    if op == "attention":
        q, k, v = _leaves(randn(2, 3, 17, 16), randn(2, 3, 17, 16), randn(2, 3, 17, 16))
        out = impl(q, k, v, True)
        (out.float() * randn(2, 3, 17, 16).float()).sum().backward()
        return [("out", out), *zip(("dq", "dk", "dv"), _grads([q, k, v]), strict=True)]
    if op == "adamw":
        # Small weights: the update (~lr per step) is then well above the weights' rounding step even in
        # bf16, and the updates (not the weights) are compared, so a wrong step cannot hide in rounding.
        start = [randn(7, 5) * 0.01, randn(5) * 0.01]
        params = [torch.nn.Parameter(s.clone()) for s in start]
        opt = impl(params, 1e-2, (0.9, 0.95), 1e-8, 0.1)
        for _ in range(3):
            for p in params:
                p.grad = randn(*p.shape)
            opt.step()
        return [(f"update{i}", p.detach() - s) for i, (p, s) in enumerate(zip(params, start, strict=True))]
    raise AssertionError(f"no check for op {op}")


def compare_to_reference(op: str, impl, reference, dtype: torch.dtype, label: str) -> None:
    got = run_op(op, impl, dtype)
    want = run_op(op, reference, dtype)
    for (name, a), (_, e) in zip(got, want, strict=True):
        assert_close(a, e, dtype, f"{label} {op} {name}")
