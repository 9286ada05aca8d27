"""The update exchange: each replica steps AdamW on its own gradient and the replicas apply the mean of their
compressed changes. Over two real gloo processes the parameters stay identical, with every coordinate kept
the applied change is the mean of the local AdamW steps, and with few kept nothing is lost: what was applied
plus what waits in the accumulator is the sum of the replicas' own changes."""

from __future__ import annotations

import functools

import torch

from tests.support.kernels.ranks import run_ranks

WORKER = r"""
import copy, json, sys, torch
import torch.distributed as dist
torch.set_num_threads(1)
from myolo.kernels.defense.compress import Compressor
from myolo.kernels.defense.exchange import SparseExchange
keep = float(sys.argv[1])
dist.init_process_group("gloo")
rank = dist.get_rank()
names = ["layers.0.feed_forward.w1.weight", "tok_embeddings.weight"]
torch.manual_seed(0)
ps = [torch.nn.Parameter(torch.randn(s)) for s in [(12, 8), (40, 4)]]
shadow = [torch.nn.Parameter(p.detach().clone()) for p in ps]  # the same optimizer, stepped without exchange
opt = torch.optim.AdamW(ps, lr=0.01)
ex = SparseExchange(Compressor(list(zip(names, ps)), keep=keep, seed=5), None, 2)
gen = torch.Generator().manual_seed(100 + rank)
out = []
for step in range(1, 5):
    grads = [torch.randn(p.shape, generator=gen) for p in ps]
    start = [p.detach().clone() for p in ps]
    # this replica's own change, from the same start and optimizer state
    probe = [torch.nn.Parameter(s.clone()) for s in start]
    probe_opt = torch.optim.AdamW(probe, lr=0.01)
    probe_opt.load_state_dict(copy.deepcopy(opt.state_dict()))
    for q, g in zip(probe, grads):
        q.grad = g.clone()
    probe_opt.step()
    own = [q.detach() - s for q, s in zip(probe, start)]
    for p, g in zip(ps, grads):
        p.grad = g.clone()
    ex.exchange_update(step, opt.step)
    mean_own = [o.clone() for o in own]
    for m in mean_own:
        dist.all_reduce(m)
        m.div_(2)
    out.append({
        "params": [p.detach().tolist() for p in ps],
        "applied": [(p.detach() - s).tolist() for p, s in zip(ps, start)],
        "mean_own": [m.tolist() for m in mean_own],
        "grads_cleared": all(p.grad is None for p in ps),
        "residual": [v.tolist() for v in ex.compressor.residual().values()],
    })
dist.barrier()  # every rank done with gloo before any tears it down (an early exit aborts the other)
dist.destroy_process_group()
print(json.dumps(out))
"""


@functools.cache  # one pair of processes per keep share, shared by the tests that read it
def run_pair(keep: float) -> list[list[dict]]:
    return run_ranks(["-c", WORKER, str(keep)])


def t(x: list) -> torch.Tensor:
    return torch.tensor(x)


def test_replicas_apply_the_same_change_and_keep_identical_parameters() -> None:
    r0, r1 = run_pair(0.1)
    for s0, s1 in zip(r0, r1, strict=True):
        for a, b in zip(s0["params"], s1["params"], strict=True):
            assert torch.equal(t(a), t(b))
        assert s0["grads_cleared"] and s1["grads_cleared"]


def test_keeping_every_coordinate_applies_the_mean_of_the_local_steps() -> None:
    for rank_steps in run_pair(1.0):
        for step in rank_steps:
            for got, want in zip(step["applied"], step["mean_own"], strict=True):
                assert torch.allclose(t(got), t(want), atol=1e-6)


def test_few_coordinates_lose_nothing_applied_plus_waiting_is_the_sum_of_own_changes() -> None:
    r0, r1 = run_pair(0.1)
    for i in range(2):  # per tensor: sum over steps of applied = mean over replicas of (own sum - residual)
        applied = sum(t(s["applied"][i]) for s in r0)
        own_sum = sum(t(s["mean_own"][i]) for s in r0)  # already the replicas' mean
        waiting = (t(r0[-1]["residual"][i]) + t(r1[-1]["residual"][i])) / 2
        assert torch.allclose(applied + waiting, own_sum, atol=1e-5)
        assert not torch.allclose(waiting, torch.zeros_like(waiting))  # something did wait: the test bites
