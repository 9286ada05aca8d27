"""The gradient-leakage harness: what an honest-but-curious aggregator sees of one client, and its attacks.

A client holds one batch of text; the aggregator receives its gradient message for one step, under one of
three exchanges: dense (no defense), plain top-k of every tensor, or ``myolo.kernels.defense`` (top-k with error
feedback, the vocabulary's rows drawn). The client is fresh (nothing accumulated yet), so its first message is
the most its data can show: the worst case for the defense. The aggregator knows the model, the batch's shape
and the exchange (the defense's row draw is public: it depends on no data). Attacks:

- ``token_set``: the rows of the input embedding that the message shows non-zero: the batch's tokens.
- ``dlg``: DLG with TAG's distance (L2 + 0.01 L1 over every tensor), optimising a relaxed one-hot sequence
  (softmax of free logits: inputs as mixtures of embedding rows, targets as soft labels) until its gradient
  matches the message, the coordinates not sent read as zeros; then each position projects to its nearest
  token (the arg max), then LAMP's discrete stage: local search on hard tokens, each position taking
  whichever of its best-ranked tokens makes the real gradient match best, and random span moves putting
  recovered pieces where the real gradient says they go. Rows are matched to the true rows by
  the best assignment. Given a dense message the
  attacker knows the batch's token set exactly (the embedding's non-zero rows) and optimises over those
  tokens only, which makes the undefended baseline as strong as TAG's use of the embedding gradient.
- ``adaptive``: the same optimisation matched on the transmitted coordinates only.

Under the update exchange (``--defense-exchange update``) the message is AdamW's first step instead of the
gradient, through the same compressor. The aggregator knows the learning rate, the weight decay and the
weights, so it takes those out and reads ``g / (|g| + eps)``, the gradient's sign, at the sent coordinates.
DLG and the adaptive attack then match the candidate gradient's direction to those signs, tensor by tensor
(cosine distance): magnitudes are gone, so an L2 match would mean nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment
from torch.func import functional_call, grad, vmap

from myolo.kernels.defense.compress import Compressor
from myolo.kernels.model import GPT

# pre-registered: what counts as an attack that got through (anything else is "blocked")
RECONSTRUCTED = 0.5  # a reconstruction recovering at least this share of positions (or one whole sequence)
TOKEN_SET_HIT = 0.5  # a token-set guess with recall and precision both at least this


@dataclass(frozen=True)
class Message:
    """The dense view of what the aggregator received (zeros where nothing was sent) and where it was sent."""

    grads: dict[str, torch.Tensor]
    sent: dict[str, torch.Tensor]  # bool masks
    nbytes: int


def client_gradient(model: GPT, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """The client's gradient of the mean next-token loss on ``tokens`` (B, S + 1)."""
    model.zero_grad(set_to_none=True)
    logits = model(tokens[:, :-1])
    F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten()).backward()
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def dense(grads: dict[str, torch.Tensor]) -> Message:
    return Message(grads, {n: torch.ones_like(g, dtype=torch.bool) for n, g in grads.items()}, 4 * _numel(grads))


def plain_topk(grads: dict[str, torch.Tensor], keep: float) -> Message:
    """Top-k of every tensor by magnitude, the vocabulary's included: indices and values."""
    out, sent, nbytes = {}, {}, 0
    for n, g in grads.items():
        k = max(1, math.ceil(keep * g.numel()))
        idx = g.abs().flatten().topk(k).indices
        mask = torch.zeros(g.numel(), dtype=torch.bool)
        mask[idx] = True
        sent[n] = mask.view_as(g)
        out[n] = torch.where(sent[n], g, torch.zeros_like(g))
        nbytes += 8 * k
    return Message(out, sent, nbytes)


def defended(
    model: GPT, grads: dict[str, torch.Tensor], keep: float, step: int = 1, vocab_keep: float | None = None
) -> Message:
    """What ``myolo.kernels.defense`` sends for ``grads`` as a fresh client's first message."""
    named = list(model.named_parameters())
    comp = Compressor(named, keep, seed=0, vocab_keep=vocab_keep)
    for name, p in named:
        p.grad = grads[name].clone()
    message = comp.compress(step)
    comp.install([message], step)
    out = {name: p.grad.detach().clone() for name, p in named}
    sent: dict[str, torch.Tensor] = {}
    flat_sent = torch.zeros(comp.flat_size, dtype=torch.bool)
    flat_sent[message.indices.long()] = True
    for slot in comp.slots:
        mask = torch.zeros_like(slot.v, dtype=torch.bool)
        if slot.vocab:
            mask[comp.drawn_rows(slot, step)] = True
        else:
            mask.view(-1).copy_(flat_sent[slot.offset : slot.offset + mask.numel()])
        sent[slot.name] = mask
    model.zero_grad(set_to_none=True)
    return Message(out, sent, message.nbytes)


def defended_update(
    model: GPT,
    grads: dict[str, torch.Tensor],
    keep: float,
    *,
    lr: float = 2e-3,
    weight_decay: float = 0.1,
    betas: tuple[float, float] = (0.9, 0.95),
    eps: float = 1e-8,
    step: int = 1,
    vocab_keep: float | None = None,
) -> Message:
    """What the update exchange sends for ``grads`` as a fresh client's first message, as the aggregator
    reads it: the known decay and learning rate taken out of the sent change, leaving ``g / (|g| + eps)``."""
    named = list(model.named_parameters())
    start = {n: p.detach().clone() for n, p in named}
    shadow = [torch.nn.Parameter(start[n].clone()) for n, _ in named]
    opt = torch.optim.AdamW(shadow, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    for q, (n, _) in zip(shadow, named, strict=True):
        q.grad = grads[n].clone()
    opt.step()
    change = {n: q.detach() - start[n] for q, (n, _) in zip(shadow, named, strict=True)}
    message = defended(model, change, keep, step, vocab_keep)
    seen = {}
    for n, sent in message.sent.items():
        u = torch.where(sent, -(message.grads[n] + lr * weight_decay * start[n]) / lr, 0.0)
        seen[n] = torch.where(u.abs() >= 0.5, u, 0.0)  # +-1 where g != 0, else 0 up to rounding: drop the latter
    return Message(seen, message.sent, message.nbytes)


def _numel(grads: dict[str, torch.Tensor]) -> int:
    return sum(g.numel() for g in grads.values())


# ---- the attacks -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SetScore:
    precision: float
    recall: float
    hits: int
    guessed: int
    truth: int

    @property
    def succeeded(self) -> bool:
        return self.recall >= TOKEN_SET_HIT and self.precision >= TOKEN_SET_HIT


def score_set(guess: set[int], truth: set[int]) -> SetScore:
    hits = len(guess & truth)
    return SetScore(hits / len(guess) if guess else 0.0, hits / len(truth), hits, len(guess), len(truth))


def token_set(message: Message) -> set[int]:
    """The rows of the input embedding the message shows non-zero."""
    rows = message.grads["tok_embeddings.weight"].abs().sum(1)
    return {int(r) for r in torch.nonzero(rows).flatten()}


@dataclass(frozen=True)
class Reconstruction:
    tokens: torch.Tensor  # (B, S + 1), rows in the true rows' order
    position_hits: int
    positions: int
    exact_rows: int
    set_score: SetScore

    @property
    def accuracy(self) -> float:
        return self.position_hits / self.positions

    @property
    def succeeded(self) -> bool:
        return self.accuracy >= RECONSTRUCTED or self.exact_rows > 0


def _soft_forward(model: GPT, z: torch.Tensor) -> torch.Tensor:
    """The mean soft next-token loss of the relaxed sequence ``softmax(z)`` (B, S + 1, V)."""
    probs = z.softmax(-1)
    assert model.tok_embeddings is not None and model.norm is not None and model.output is not None
    h = probs[:, :-1] @ model.tok_embeddings.weight
    for block in model.layers.values():
        h = block(h, model.rope_cos, model.rope_sin)
    logits = model.output(model.norm(h))
    return -(probs[:, 1:] * logits.log_softmax(-1)).sum(-1).mean()


def _distance(
    grads: list[torch.Tensor], target: list[torch.Tensor], masks: list[torch.Tensor | None], scale: float, cosine: bool
) -> torch.Tensor:
    """How far each candidate's gradient (a leading dimension of K candidates) is from the message: TAG's
    L2 + 0.01 L1 over every tensor, or with ``cosine`` one minus each tensor's cosine similarity, summed."""
    dist = torch.zeros(grads[0].shape[0])
    for g, t, m in zip(grads, target, masks, strict=True):
        if cosine:
            if bool(t.any()):
                seen = (g if m is None else g * m).flatten(1)
                flat = t.flatten()
                dist = dist + 1 - (seen @ flat) / (seen.norm(dim=1) * flat.norm() + 1e-12)
            continue
        diff = (g - t if m is None else (g - t) * m).flatten(1)
        dist = dist + (diff * diff).sum(1) / scale + 0.01 * diff.abs().sum(1) / math.sqrt(scale)
    return dist


def _target(
    model: GPT, message: Message, adaptive: bool
) -> tuple[list[torch.Tensor], list[torch.Tensor | None], float]:
    names = [n for n, _ in model.named_parameters()]
    target = [message.grads[n] for n in names]
    masks = [message.sent[n].float() if adaptive else None for n in names]
    return target, masks, sum(float((t * t).sum()) for t in target) or 1.0


def relax(
    model: GPT,
    message: Message,
    shape: tuple[int, int],
    *,
    adaptive: bool,
    iters: int,
    seed: int,
    vocabulary: set[int] | None = None,
    cosine: bool = False,
) -> torch.Tensor:
    """DLG/TAG's continuous stage: the logits (B, S + 1, V) of the relaxed sequence whose gradient best matches
    ``message``. ``vocabulary``: the tokens the sequence is known to use (from the embedding's rows, when the
    message holds all of them); the optimisation then picks among those only, as TAG and LAMP use the embedding
    gradient. ``cosine``: match each tensor's direction only (a message of signs, ``defended_update``)."""
    params = [p for _, p in model.named_parameters()]
    target, masks, scale = _target(model, message, adaptive)
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(shape[0], shape[1], model.cfg.vocab_size, generator=gen).requires_grad_(True)
    outside = torch.zeros(model.cfg.vocab_size)
    if vocabulary:
        outside = torch.full((model.cfg.vocab_size,), -1e4)
        outside[sorted(vocabulary)] = 0.0
    opt = torch.optim.Adam([z], lr=0.2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, iters, eta_min=0.01)
    for _ in range(iters):
        opt.zero_grad()
        loss = _soft_forward(model, z + outside)
        grads = torch.autograd.grad(loss, params, create_graph=True)
        _distance([g.unsqueeze(0) for g in grads], target, masks, scale, cosine)[0].backward()
        opt.step()
        sched.step()
    model.zero_grad(set_to_none=True)
    return z.detach() + outside


def invert(model: GPT, message: Message, shape: tuple[int, int], **how: Any) -> torch.Tensor:
    """DLG/TAG with projection: each position of the relaxed solution (:func:`relax`) to its nearest token."""
    return relax(model, message, shape, **how).argmax(-1)


def refine(
    model: GPT,
    message: Message,
    logits: torch.Tensor,
    *,
    adaptive: bool,
    cosine: bool = False,
    candidates: int = 8,
    sweeps: int = 2,
    moves: int = 0,
    seed: int = 0,
) -> torch.Tensor:
    """The discrete stage LAMP adds after the relaxation: local search on hard tokens. Each position in turn
    takes whichever of its ``candidates`` best-ranked tokens (by the relaxed ``logits``) gives the sequence
    whose real gradient best matches ``message``. Then, with ``moves`` > 0, that many random span moves (a span
    of one row cut out and put back elsewhere in the row, LAMP's reordering step) are tried, in chunks, each
    chunk's best kept when it matches better. A sweep does both; the search stops after ``sweeps`` or a sweep
    that changed nothing. The token changes remove the projection's rounding error, which the continuous stage
    cannot see; the moves put recovered words back where they belong, which neither stage does alone."""
    params = {n: p.detach() for n, p in model.named_parameters()}
    target, masks, scale = _target(model, message, adaptive)

    def loss(weights: dict[str, torch.Tensor], tokens: torch.Tensor) -> torch.Tensor:
        logits_ = functional_call(model, weights, (tokens[:, :-1],))
        return F.cross_entropy(logits_.flatten(0, 1), tokens[:, 1:].flatten())

    grad_of = vmap(grad(loss), in_dims=(None, 0))

    def distance(batch: torch.Tensor) -> torch.Tensor:
        out = []
        for chunk in batch.split(VMAP_CHUNK):
            g = grad_of(params, chunk)
            out.append(_distance([g[n] for n in params], target, masks, scale, cosine))
        return torch.cat(out)

    tokens = logits.argmax(-1)
    ranked = logits.topk(min(candidates, logits.shape[-1]), dim=-1).indices
    best = float(distance(tokens.unsqueeze(0))[0])
    gen = torch.Generator().manual_seed(seed)

    def take(batch: torch.Tensor) -> bool:
        nonlocal tokens, best
        d = distance(batch)
        k = int(d.argmin())
        if float(d[k]) < best and not torch.equal(batch[k], tokens):
            tokens, best = batch[k].clone(), float(d[k])
            return True
        return False

    for _ in range(sweeps):
        changed = False
        for b in range(tokens.shape[0]):
            for s in range(tokens.shape[1]):
                batch = tokens.unsqueeze(0).repeat(ranked.shape[-1], 1, 1)
                batch[:, b, s] = ranked[b, s]
                changed |= take(batch)
        for start in range(0, moves, VMAP_CHUNK):
            changed |= take(span_moves(tokens, min(VMAP_CHUNK, moves - start), gen))
        if not changed:
            break
    return tokens


VMAP_CHUNK = 256  # candidate sequences whose gradients are taken in one vmap call


def span_moves(tokens: torch.Tensor, count: int, gen: torch.Generator) -> torch.Tensor:
    """``count`` copies of ``tokens`` (B, L), each with one random span of one row cut out and inserted
    elsewhere in that row: shifts, rotations and swaps of neighbouring pieces."""
    rows, length = tokens.shape
    out = tokens.unsqueeze(0).repeat(count, 1, 1)
    for c in range(count):
        b = int(torch.randint(0, rows, (), generator=gen))
        i = int(torch.randint(0, length, (), generator=gen))
        j = int(torch.randint(i + 1, length + 1, (), generator=gen))
        k = int(torch.randint(0, length - (j - i) + 1, (), generator=gen))
        rest = torch.cat([tokens[b, :i], tokens[b, j:]])
        out[c, b] = torch.cat([rest[:k], tokens[b, i:j], rest[k:]])
    return out


def score_reconstruction(guess: torch.Tensor, truth: torch.Tensor) -> Reconstruction:
    """Match guessed rows to true rows (best assignment on positions recovered), then count."""
    agree = (guess[:, None, :] == truth[None, :, :]).sum(-1).numpy()  # (guess row, true row)
    rows, cols = linear_sum_assignment(agree, maximize=True)
    ordered = torch.empty_like(truth)
    ordered[cols] = guess[rows]
    hits = int((ordered == truth).sum())
    exact = int((ordered == truth).all(1).sum())
    return Reconstruction(
        ordered,
        hits,
        truth.numel(),
        exact,
        score_set(set(guess[:, :-1].flatten().tolist()), set(truth[:, :-1].flatten().tolist())),
    )
