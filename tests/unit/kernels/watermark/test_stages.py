"""The mark's regulariser over two real gloo "pipeline stages", one holding every carrier and one holding none:
both see the whole model's regulariser, and the carrying stage gets the gradient a whole model would, once."""

from __future__ import annotations

import torch

from myolo.kernels.model import GPT, preset
from myolo.kernels.watermark import DigitalWatermark
from tests.support.kernels.ranks import run_ranks

KEY = "stage test key"

WORKER = r"""
import json, sys, torch
import torch.distributed as dist
torch.set_num_threads(1)
from myolo.kernels.model import GPT, preset
from myolo.kernels.watermark import DigitalWatermark
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
whole = GPT(preset("tiny", n_layers=2, max_seq_len=32))
with torch.device("meta"):
    shape = GPT(preset("tiny", n_layers=2, max_seq_len=32))
part = whole if rank == 0 else torch.nn.Linear(4, 4)  # the second stage holds no feed-forward layer
mark = DigitalWatermark.generate(key=sys.argv[1])
loss = mark.loss(shape, parts=[part], group=dist.group.WORLD)
if loss.requires_grad:
    loss.backward()
assert (rank == 1) != loss.requires_grad
grads = {n: p.grad.abs().sum().item() for n, p in whole.named_parameters() if p.grad is not None} if rank == 0 else {}
print(json.dumps({"loss": loss.item(), "grads": grads}))
dist.barrier()  # every rank done with gloo before any tears it down (an early exit aborts the other)
dist.destroy_process_group()
"""


def test_a_stage_without_carriers_adds_nothing_and_the_sums_match_a_whole_model() -> None:
    outs = run_ranks(["-c", WORKER, KEY])

    torch.manual_seed(0)
    whole = GPT(preset("tiny", n_layers=2, max_seq_len=32))
    mark = DigitalWatermark.generate(key=KEY)
    loss = mark.loss(whole)
    loss.backward()
    want = {n: p.grad.abs().sum().item() for n, p in whole.named_parameters() if p.grad is not None}

    for out in outs:  # both stages see the whole model's regulariser
        assert abs(out["loss"] - loss.item()) <= 1e-6 * max(1.0, abs(loss.item()))
    assert set(outs[0]["grads"]) == set(want) and want
    for name, total in want.items():
        assert abs(outs[0]["grads"][name] - total) <= 1e-5 * max(1.0, total), name
