"""The leakage harness's discrete stage: from a relaxed guess with the truth ranked second at some positions,
or with a piece of a row out of place, the search on hard tokens finds the exact sequence (its gradient
matches the message with distance zero)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from myolo.kernels import ops
from myolo.kernels.model import GPT, preset
from myolo.kernels.ops import registry
from tests.benchmarks import leakage


@pytest.fixture(autouse=True)
def _plain_ops() -> Iterator[None]:
    """The harness differentiates through plain torch ops, as the benchmark's workers do."""
    ops.configure(prefer={"*": ["reference"]}, device="cpu", dtype=torch.float32)
    yield
    registry.reset()


def _setup() -> tuple[GPT, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = GPT(preset("tiny", n_layers=1))
    truth = torch.randint(0, 256, (2, 9), generator=torch.Generator().manual_seed(1))
    logits = torch.nn.functional.one_hot(truth, 256).float() * 5.0
    wrong = [(0, 0), (0, 4), (1, 8)]
    for b, s in wrong:  # the projection would pick a wrong token here; the truth comes second
        logits[b, s, (int(truth[b, s]) + 7) % 256] = 6.0
    return model, truth, logits


def test_the_discrete_search_repairs_the_projection() -> None:
    model, truth, logits = _setup()
    message = leakage.dense(leakage.client_gradient(model, truth))
    assert int((logits.argmax(-1) != truth).sum()) == 3
    guess = leakage.refine(model, message, logits, adaptive=False, candidates=2, sweeps=2)
    assert torch.equal(guess, truth)


def test_with_no_sweep_it_is_the_projection() -> None:
    model, truth, logits = _setup()
    message = leakage.dense(leakage.client_gradient(model, truth))
    guess = leakage.refine(model, message, logits, adaptive=False, candidates=2, sweeps=0)
    assert torch.equal(guess, logits.argmax(-1))


def test_a_message_of_signs_is_matched_by_direction_and_moves_towards_the_truth() -> None:
    model, truth, logits = _setup()
    grads = leakage.client_gradient(model, truth)
    signs = leakage.Message({n: g.sign() for n, g in grads.items()}, leakage.dense(grads).sent, 0)
    guess = leakage.refine(model, signs, logits, adaptive=True, cosine=True, candidates=2, sweeps=2)
    assert int((guess != truth).sum()) < 3


def test_span_moves_put_a_misplaced_piece_back() -> None:
    model, truth, _ = _setup()
    message = leakage.dense(leakage.client_gradient(model, truth))
    shifted = truth.clone()
    shifted[0] = torch.cat([truth[0, 6:], truth[0, :6]])  # the row's last three tokens moved to its front
    logits = torch.nn.functional.one_hot(shifted, 256).float()
    assert not torch.equal(
        leakage.refine(model, message, logits, adaptive=False, candidates=1, sweeps=3), truth
    )  # without moves, token changes alone cannot shift a piece: every candidate is the current token
    guess = leakage.refine(model, message, logits, adaptive=False, candidates=1, sweeps=3, moves=512)
    assert torch.equal(guess, truth)


def test_span_moves_keep_each_row_a_permutation_of_itself() -> None:
    tokens = torch.arange(20).view(2, 10)
    moved = leakage.span_moves(tokens, 64, torch.Generator().manual_seed(0))
    assert moved.shape == (64, 2, 10)
    for c in range(64):
        changed = [b for b in range(2) if not torch.equal(moved[c, b], tokens[b])]
        assert len(changed) <= 1  # one row at a time
        for b in range(2):
            assert sorted(moved[c, b].tolist()) == tokens[b].tolist()
