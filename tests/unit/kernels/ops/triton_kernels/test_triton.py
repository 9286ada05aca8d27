"""Our Triton kernels against the reference, on CPU through the Triton interpreter.

TRITON_INTERPRET=1 must be set before any `@triton.jit` decorator runs, and must not leak into other tests,
so in a normal run this module has one test that re-runs this file under pytest in a subprocess with the
variable set; there the real checks below are collected instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

INNER = os.environ.get("TRITON_INTERPRET") == "1"

if not INNER:

    def test_triton_kernels_under_interpreter():
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        here = Path(__file__)
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(here)],
            env=env,
            cwd=here.parents[5],
            capture_output=True,
            text=True,
            timeout=300,
        )
        tail = (proc.stdout + proc.stderr)[-4000:]
        assert proc.returncode == 0, tail
        assert " passed" in proc.stdout and "skipped" not in proc.stdout, tail

else:
    import torch

    from myolo.kernels import ops
    from myolo.kernels.ops import registry
    from tests.support.kernels.ops_checks import assert_close, compare_to_reference

    torch.set_num_threads(1)

    @pytest.fixture(autouse=True)
    def _fresh_registry():
        registry.reset()
        yield
        registry.reset()

    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
    @pytest.mark.parametrize("op", ["rms_norm", "residual_rms_norm", "cross_entropy"])
    def test_triton_matches_reference(op, dtype):
        assert ops.availability(op, "cpu", dtype)["triton"] == "available"
        impls = {n: b.impls[op] for n, b in registry.backends().items() if op in b.impls}
        compare_to_reference(op, impls["triton"], impls["reference"], dtype, "triton")

    def test_registry_selects_triton_when_preferred():
        selected = ops.configure(prefer={"*": ["triton"]})
        assert selected["residual_rms_norm"] == "triton" and selected["cross_entropy"] == "triton"
        assert selected["layer_norm"] == "reference"  # no Triton layer norm: last resort
        x = torch.randn(2, 3, 16)
        y, h = ops.residual_rms_norm(x, x, torch.ones(16), 1e-6)
        torch.testing.assert_close(h, 2 * x)
        torch.testing.assert_close(y, registry.backends()["reference"].impls["rms_norm"](h, torch.ones(16), 1e-6))
        assert ops.selected_backends()["residual_rms_norm"] == "triton"
        # A DTensor input with the same preference must not reach the raw kernel.
        assert registry.resolve("residual_rms_norm", x.device, x.dtype, dtensor=True)[0] == "reference"

    def test_leaf_gradients_accumulate_over_two_backwards():
        from myolo.kernels.ops.triton_kernels import fused_residual_rms_norm

        x = torch.randn(4, 24, requires_grad=True)
        r = torch.randn(4, 24, requires_grad=True)
        w = torch.randn(24, requires_grad=True)
        for _ in range(2):
            y, h = fused_residual_rms_norm(x, r, w, 1e-6)
            (y.sum() + 2 * h.sum()).backward()
        grads = [t.grad.clone() for t in (x, r, w)]
        for t in (x, r, w):
            t.grad = None
        hh = x + r
        yy = registry.backends()["reference"].impls["rms_norm"](hh, w, 1e-6)
        (2 * (yy.sum() + 2 * hh.sum())).backward()
        for got, t, name in zip(grads, (x, r, w), "xrw", strict=True):
            assert_close(got, t.grad, torch.float32, f"accumulated d{name}")

    def test_without_residual_the_returned_input_still_gets_its_gradient():
        from myolo.kernels.ops.triton_kernels import fused_residual_rms_norm

        x = torch.randn(3, 40, requires_grad=True)
        w = torch.randn(40, requires_grad=True)
        y, h = fused_residual_rms_norm(x, None, w, 1e-6)
        (y.sum() + 3 * h.sum()).backward()
        got = x.grad.clone()
        x.grad = None
        (registry.backends()["reference"].impls["rms_norm"](x, w, 1e-6).sum() + 3 * x.sum()).backward()
        assert_close(got, x.grad, torch.float32, "dx without residual")

    def test_non_contiguous_and_large_vocab_chunks():
        from myolo.kernels.ops.triton_kernels import fused_cross_entropy

        logits = torch.randn(6, 5000).t().contiguous().t()[:, :4500]  # strided view, > one 4096 block
        targets = torch.tensor([0, 4499, 4096, -100, 17, 4095])
        want = registry.backends()["reference"].impls["cross_entropy"](logits, targets, -100)
        assert_close(fused_cross_entropy(logits, targets, -100), want, torch.float32, "chunked loss")

    def test_too_wide_rows_get_a_clear_error():
        from myolo.kernels.ops.triton_kernels import fused_residual_rms_norm

        x = torch.randn(1, 20000)
        with pytest.raises(ValueError, match=r"hidden size 20000 is too large.*native backend"):
            fused_residual_rms_norm(x, None, torch.ones(20000), 1e-6)

    def test_bad_cross_entropy_shapes_are_explained():
        from myolo.kernels.ops.triton_kernels import fused_cross_entropy

        with pytest.raises(ValueError, match=r"logits \(tokens, vocab\) and targets \(tokens,\)"):
            fused_cross_entropy(torch.randn(2, 3, 4), torch.zeros(2, dtype=torch.long))
