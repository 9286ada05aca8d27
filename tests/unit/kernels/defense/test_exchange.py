"""The sparse exchange over two real gloo processes: with every coordinate kept it is the dense all-reduce's
mean; with few kept, every replica installs the same gradient, the mean of the two messages."""

from __future__ import annotations

import pytest
import torch

from tests.support.kernels.ranks import run_ranks

WORKER = r"""
import json, sys, torch
import torch.distributed as dist
torch.set_num_threads(1)
from myolo.kernels.defense.compress import Compressor
from myolo.kernels.defense.exchange import SparseExchange
keep = float(sys.argv[1])
dist.init_process_group("gloo")
rank = dist.get_rank()
names = ["layers.0.feed_forward.w1.weight", "tok_embeddings.weight", "output.weight"]
ps = [torch.nn.Parameter(torch.zeros(s)) for s in [(12, 8), (40, 4), (40, 4)]]
ex = SparseExchange(Compressor(list(zip(names, ps)), keep=keep, seed=5), None, 2)
gen = torch.Generator().manual_seed(100 + rank)
out = []
for step in range(1, 4):
    for p in ps:
        p.grad = torch.randn(p.shape, generator=gen)
    dense = [p.grad.clone() for p in ps]
    for d in dense:
        dist.all_reduce(d)
        d.div_(2)
    sent = ex.exchange(step)
    out.append({
        "installed": [p.grad.tolist() for p in ps],
        "dense_mean": [d.tolist() for d in dense],
        "sent": {"indices": sent.indices.tolist(), "values": sent.values.tolist(), "rows": sent.rows.tolist()},
        "bytes": sent.nbytes,
    })
dist.barrier()  # every rank done with gloo before any tears it down (an early exit aborts the other)
dist.destroy_process_group()
print(json.dumps(out))
"""


def run_pair(keep: float) -> list[list[dict]]:
    return run_ranks(["-c", WORKER, str(keep)])


def test_keeping_every_coordinate_is_the_dense_mean() -> None:
    for rank_steps in run_pair(1.0):
        for step in rank_steps:
            for got, want in zip(step["installed"], step["dense_mean"], strict=True):
                assert torch.allclose(torch.tensor(got), torch.tensor(want), atol=1e-6)


@pytest.mark.parametrize("keep", [0.1])
def test_few_coordinates_install_the_mean_of_both_messages_on_both_replicas(keep: float) -> None:
    r0, r1 = run_pair(keep)
    for s0, s1 in zip(r0, r1, strict=True):
        for a, b in zip(s0["installed"], s1["installed"], strict=True):
            assert torch.equal(torch.tensor(a), torch.tensor(b))  # the replicas step identically
        # the first tensor (top-k): its installed gradient is the mean of the two sparse messages
        want = torch.zeros(96)
        for s in (s0, s1):
            idx = torch.tensor(s["sent"]["indices"], dtype=torch.long)
            want.index_add_(0, idx, torch.tensor(s["sent"]["values"]))
        got = torch.tensor(s0["installed"][0]).view(-1)
        assert torch.allclose(got, want / 2, atol=1e-6)
        assert int((got != 0).sum()) <= 2 * 10  # at most ceil(0.1 x 96) coordinates from each replica
        assert s0["bytes"] == 10 * 8 + 2 * 4 * 4 * 4
