"""One rank of tests/unit/kernels/ops/test_dtensor.py: sequence-parallel (Shard(1)) inputs through myolo.kernels.ops on a gloo mesh.
Prints one JSON line with the checks' results; the test asserts on them."""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

sys.path.insert(0, os.path.dirname(__file__))
from ops_checks import assert_close

from myolo.kernels import ops
from myolo.kernels.ops import registry


def main() -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    # Prefer the raw kernels first: DTensor inputs must still end on a DTensor-capable backend.
    configured = ops.configure(prefer={"*": ["triton", "apex", "native"]})
    ref = registry.backends()["reference"].impls
    torch.manual_seed(0)  # same full tensors on every rank
    x, r, w = torch.randn(2, 8, 32), torch.randn(2, 8, 32), torch.randn(32)
    dx = distribute_tensor(x.clone().requires_grad_(True), mesh, [Shard(1)])
    dr = distribute_tensor(r, mesh, [Shard(1)])
    dw = distribute_tensor(w.clone().requires_grad_(True), mesh, [Replicate()])
    y, h = ops.residual_rms_norm(dx, dr, dw, 1e-6)
    y.sum().backward()
    xl, wl = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    yl, _ = ref["residual_rms_norm"](xl, r, wl, 1e-6)
    yl.sum().backward()
    assert isinstance(y, DTensor) and y.placements == (Shard(1),), y.placements
    assert_close(y.full_tensor(), yl, torch.float32, "dtensor y")
    assert_close(h.full_tensor(), x + r, torch.float32, "dtensor h")
    assert_close(dx.grad.full_tensor(), xl.grad, torch.float32, "dtensor dx")
    assert_close(dw.grad.full_tensor(), wl.grad, torch.float32, "dtensor dw")
    assert_close(ops.rms_norm(dx, dw, 1e-6).full_tensor(), ref["rms_norm"](x, w, 1e-6), torch.float32, "rms")

    logits, targets = torch.randn(8, 50), torch.randint(0, 50, (8,))
    loss = ops.cross_entropy(distribute_tensor(logits, mesh, [Shard(0)]), distribute_tensor(targets, mesh, [Shard(0)]))
    assert_close(loss.full_tensor(), ref["cross_entropy"](logits, targets, -100), torch.float32, "dtensor ce")

    p = torch.nn.Parameter(distribute_tensor(torch.randn(4, 6), mesh, [Shard(0)]))
    opt = ops.make_adamw([p], lr=1e-2)
    p.grad = distribute_tensor(torch.ones(4, 6), mesh, [Shard(0)])
    opt.step()
    print(
        json.dumps({"rank": dist.get_rank(), "configured": configured, "selected": ops.selected_backends()}), flush=True
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
