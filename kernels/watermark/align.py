"""Undo a neuron permutation against the owner's reference weights before reading the mark.

Permuting neurons leaves a network's function unchanged and scrambles every white-box mark (Yan et al. 2023).
Two permutations of our GPT are free to an attacker: the hidden units of each block's feed-forward (rows of
``w1`` and ``w3``, columns of ``w2``), and the residual stream's dimensions (columns of every matrix that reads
it, rows of those that write it, the embedding's columns and each norm's weights: RMSNorm treats every
dimension alike). Each is found as an assignment problem (Hungarian, ``scipy``) on the cosine similarity of the
suspect's units to the reference's, and undone in place. Fine-tuning, pruning or quantization after the
permutation move the weights a little; the similarity of a unit to its own origin stays far above its
similarity to any other, so the assignment still finds it.
"""

from __future__ import annotations

import re

import torch
from scipy.optimize import linear_sum_assignment
from torch import nn

READS_RESIDUAL = re.compile(r"(attention\.w[qkv]|feed_forward\.w[13]|^output)\.weight$")
WRITES_RESIDUAL = re.compile(r"(attention\.wo|feed_forward\.w2)\.weight$")


def _match(reference: torch.Tensor, suspect: torch.Tensor) -> torch.Tensor:
    """perm such that suspect[perm[i]] is reference[i] (units are rows)."""
    a = torch.nn.functional.normalize(reference.double(), dim=1)
    b = torch.nn.functional.normalize(suspect.double(), dim=1)
    _, cols = linear_sum_assignment((a @ b.T).numpy(), maximize=True)
    return torch.as_tensor(cols, dtype=torch.long)


def _residual_features(params: dict[str, torch.Tensor]) -> torch.Tensor:
    """One row per residual dimension: everything every parameter holds of it."""
    rows = []
    for name, p in params.items():
        if name == "tok_embeddings.weight" or READS_RESIDUAL.search(name):
            rows.append(p.T)
        elif WRITES_RESIDUAL.search(name):
            rows.append(p)
    return torch.cat(rows, dim=1)


@torch.no_grad()
def realign(model: nn.Module, reference: dict[str, torch.Tensor]) -> dict[str, int]:
    """Permute ``model``'s residual dimensions, then each block's feed-forward units, into the reference's
    order. Returns how many units each step moved (0 everywhere for a model that was not permuted)."""
    params = dict(model.named_parameters())
    missing = [n for n in params if n not in reference]
    if missing or any(reference[n].shape != p.shape for n, p in params.items()):
        raise ValueError(f"the reference weights are not of this model's shape (first mismatch: {missing[:1]})")
    moved: dict[str, int] = {}
    ref = {n: t.detach().float().cpu() for n, t in reference.items()}
    perm = _match(_residual_features(ref), _residual_features({n: p.float().cpu() for n, p in params.items()}))
    moved["residual"] = int((perm != torch.arange(len(perm))).sum())
    if moved["residual"]:
        for name, p in params.items():
            if name == "tok_embeddings.weight" or READS_RESIDUAL.search(name):
                p.copy_(p[:, perm.to(p.device)])
            elif WRITES_RESIDUAL.search(name) or (p.ndim == 1 and p.numel() == len(perm)):
                p.copy_(p[perm.to(p.device)])
    for block in sorted({n.split(".")[1] for n in params if n.startswith("layers.")}, key=int):
        pre = f"layers.{block}.feed_forward"
        w1, w3, w2 = (params[f"{pre}.{w}.weight"] for w in ("w1", "w3", "w2"))
        units = torch.cat([w1, w3, w2.T], dim=1).float().cpu()
        ref_units = torch.cat([ref[f"{pre}.w1.weight"], ref[f"{pre}.w3.weight"], ref[f"{pre}.w2.weight"].T], dim=1)
        perm = _match(ref_units, units)
        moved[pre] = int((perm != torch.arange(len(perm))).sum())
        if moved[pre]:
            index = perm.to(w1.device)
            w1.copy_(w1[index])
            w3.copy_(w3[index])
            w2.copy_(w2[:, index])
    return moved
