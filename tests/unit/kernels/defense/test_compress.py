"""Error feedback loses nothing (exact on integer gradients), the vocabulary's rows leave by a draw that no
data steers, and a message's bytes are what was sent."""

from __future__ import annotations

import pytest
import torch

from myolo.kernels.defense.compress import Compressor


def params() -> dict[str, torch.nn.Parameter]:
    return {
        "layers.0.feed_forward.w1.weight": torch.nn.Parameter(torch.zeros(12, 8)),
        "tok_embeddings.weight": torch.nn.Parameter(torch.zeros(40, 4)),
        "output.weight": torch.nn.Parameter(torch.zeros(40, 4)),
    }


def integer_grads(ps: dict[str, torch.nn.Parameter], gen: torch.Generator) -> None:
    for p in ps.values():
        p.grad = torch.randint(-7, 8, p.shape, generator=gen).float()


@pytest.mark.parametrize("keep", [0.05, 0.3, 1.0])
def test_what_was_sent_plus_what_is_left_is_every_gradient(keep: float) -> None:
    ps = params()
    comp = Compressor(list(ps.items()), keep=keep)
    gen = torch.Generator().manual_seed(0)
    total = {n: torch.zeros_like(p) for n, p in ps.items()}
    sent = {n: torch.zeros_like(p) for n, p in ps.items()}
    for step in range(1, 26):
        integer_grads(ps, gen)
        for n, p in ps.items():
            total[n] += p.grad
        comp.install([comp.compress(step)], step)  # one replica: the mean is its own message
        for n, p in ps.items():
            sent[n] += p.grad
    for n in ps:
        assert torch.equal(sent[n] + comp.residual()[n], total[n])
    if keep == 1.0:
        assert all(torch.equal(r, torch.zeros_like(r)) for r in comp.residual().values())


def test_momentum_correction_accumulates_the_momentum_and_masks_what_left() -> None:
    ps = {"layers.0.attention.wq.weight": torch.nn.Parameter(torch.zeros(16))}
    comp = Compressor(list(ps.items()), keep=0.25, momentum=0.5)
    gen = torch.Generator().manual_seed(1)
    u = torch.zeros(16)
    momentum_sum = torch.zeros(16)
    sent = torch.zeros(16)
    for step in range(1, 11):
        integer_grads(ps, gen)
        g = ps["layers.0.attention.wq.weight"].grad.clone()
        comp.install([comp.compress(step)], step)
        got = ps["layers.0.attention.wq.weight"].grad
        u = 0.5 * u + g
        momentum_sum += u
        u[got != 0] = 0  # momentum factor masking: what left leaves the momentum too
        sent += got
    assert torch.allclose(sent + comp.residual()["layers.0.attention.wq.weight"], momentum_sum)


def test_the_vocabulary_rows_are_drawn_whatever_the_data_and_carry_no_indices() -> None:
    a, b = params(), params()
    ca, cb = Compressor(list(a.items()), keep=0.1), Compressor(list(b.items()), keep=0.1)
    a["tok_embeddings.weight"].grad = torch.zeros(40, 4)
    a["tok_embeddings.weight"].grad[[3, 17]] = 1.0  # a batch of two tokens: only their rows are non-zero
    b["tok_embeddings.weight"].grad = torch.randn(40, 4)
    slot_a = next(s for s in ca.slots if s.name == "tok_embeddings.weight")
    slot_b = next(s for s in cb.slots if s.name == "tok_embeddings.weight")
    for step in (1, 2, 3):
        assert torch.equal(ca.drawn_rows(slot_a, step), cb.drawn_rows(slot_b, step))
    assert not torch.equal(ca.drawn_rows(slot_a, 1), ca.drawn_rows(slot_a, 2))
    sent = ca.compress(1)
    top_k_coords = 12 * 8
    assert int(sent.indices.max()) < top_k_coords  # no index ever points into a vocabulary tensor
    assert sent.rows.numel() == 2 * 4 * 4  # 4 rows of 4 for each of the two vocabulary tensors


def test_bytes_are_what_a_message_carries() -> None:
    ps = params()
    comp = Compressor(list(ps.items()), keep=0.1)
    for p in ps.values():
        p.grad = torch.ones_like(p)
    sent = comp.compress(1)
    assert sent.nbytes == 10 * (4 + 4) + 2 * 4 * 4 * 4  # ceil(0.1 x 96) coords, 4 rows x 4 of each vocab tensor
    assert comp.dense_bytes == (96 + 160 + 160) * 4


@pytest.mark.parametrize(("keep", "momentum", "words"), [(0.0, 0.0, "keep share"), (0.1, 1.0, "momentum")])
def test_bad_settings_are_refused(keep: float, momentum: float, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        Compressor(list(params().items()), keep=keep, momentum=momentum)


def test_warmup_ramps_the_top_k_share_down_to_keep_and_leaves_the_vocabulary_at_keep() -> None:
    ps = {"layers.0.feed_forward.w1.weight": torch.nn.Parameter(torch.zeros(100, 10)),
          "tok_embeddings.weight": torch.nn.Parameter(torch.zeros(50, 4))}  # fmt: skip
    comp = Compressor(list(ps.items()), keep=0.01, warmup_steps=10)
    assert comp.keep_at(0) == 1.0 and comp.keep_at(10) == comp.keep_at(500) == 0.01
    assert 0.01 < comp.keep_at(5) < 1.0 and abs(comp.keep_at(5) - 0.1) < 1e-12  # geometric: 0.01 ** 0.5
    sizes = []
    for step in (0, 5, 10, 11):
        for p in ps.values():
            p.grad = torch.randn(p.shape)
        sent = comp.compress(step)
        sizes.append((sent.indices.numel(), sent.rows.numel()))
    assert sizes == [(1000, 4), (100, 4), (10, 4), (10, 4)]  # rows: ceil(0.01 x 50) = 1 row of 4 at every step
    with pytest.raises(ValueError, match="warm-up"):
        Compressor(list(ps.items()), keep=0.01, warmup_steps=-1)


def test_the_vocabulary_share_can_be_set_apart_from_the_top_k_share() -> None:
    ps = params()
    comp = Compressor(list(ps.items()), keep=0.1, vocab_keep=0.5)
    for p in ps.values():
        p.grad = torch.ones_like(p)
    sent = comp.compress(1)
    assert (sent.indices.numel(), sent.rows.numel()) == (10, 2 * 20 * 4)  # 10 % of 96 coords; 20 of 40 rows
    comp.install([sent], 1)
    assert int((ps["tok_embeddings.weight"].grad != 0).any(dim=1).sum()) == 20
    with pytest.raises(ValueError, match="vocabulary share"):
        Compressor(list(ps.items()), keep=0.1, vocab_keep=0.0)
