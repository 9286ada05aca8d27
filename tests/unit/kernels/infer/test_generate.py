"""Cached decoding is the full forward pass, token by token; sampling is seeded and bounded."""

from __future__ import annotations

import pytest
import torch

from myolo.kernels.infer.generate import Sampling, generate, pick
from myolo.kernels.model import GPT, preset
from myolo.kernels.model.kv_cache import KVCache


def model(**overrides) -> tuple[GPT, object]:
    torch.manual_seed(0)
    cfg = preset("tiny", **overrides)
    return GPT(cfg).eval(), cfg


@pytest.mark.parametrize("kv_heads", [None, 2], ids=["mha", "gqa"])
@torch.inference_mode()
def test_cached_decoding_gives_the_logits_of_a_full_forward_pass(kv_heads) -> None:
    gpt, cfg = model(n_kv_heads=kv_heads)
    tokens = torch.randint(0, cfg.vocab_size, (2, 24), generator=torch.Generator().manual_seed(1))
    full = gpt(tokens)
    cache = KVCache.empty(cfg, 2, 24, dtype=torch.float32)
    # a prefill of 10, a chunk of 5 (the masked path), then one token at a time
    parts = [gpt(tokens[:, :10], cache), gpt(tokens[:, 10:15], cache)]
    parts += [gpt(tokens[:, i : i + 1], cache) for i in range(15, 24)]
    cached = torch.cat(parts, dim=1)
    assert cache.length == 24
    assert torch.allclose(cached, full, atol=1e-5, rtol=0), (cached - full).abs().max()


@torch.inference_mode()
def test_greedy_generation_is_argmax_of_the_full_forward_each_step() -> None:
    gpt, cfg = model()
    prompt = torch.tensor([[1, 2, 3, 4, 5]])
    out = generate(gpt, cfg, prompt, 8)
    seq = prompt
    for _ in range(8):  # the slow way: the whole sequence again for every token
        seq = torch.cat([seq, gpt(seq)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert out.tokens == [seq[0, 5:].tolist()]
    assert out.prompt_tokens == 5 and out.new_tokens == 8
    assert out.prefill_tokens_per_s > 0 and out.decode_tokens_per_s > 0


def test_sampling_is_seeded_and_top_k_keeps_only_the_k_best() -> None:
    gpt, cfg = model()
    prompt = torch.tensor([[7, 8, 9]])
    a = generate(gpt, cfg, prompt, 12, Sampling(temperature=1.0, top_k=5, seed=3)).tokens
    b = generate(gpt, cfg, prompt, 12, Sampling(temperature=1.0, top_k=5, seed=3)).tokens
    assert a == b
    logits = torch.tensor([[0.0, 5.0, 1.0, 4.0, 2.0]])
    drawn = {int(pick(logits, Sampling(temperature=2.0, top_k=2), torch.Generator().manual_seed(s))) for s in range(64)}
    assert drawn == {1, 3}
    assert int(pick(logits, Sampling(), None)) == 1


def test_generation_stops_at_eos() -> None:
    gpt, cfg = model()
    prompt = torch.tensor([[1, 2, 3]])
    free = generate(gpt, cfg, prompt, 6).tokens[0]
    eos = free[2]
    assert generate(gpt, cfg, prompt, 6, eos=eos).tokens[0] == free[: free.index(eos) + 1]


@pytest.mark.parametrize(
    ("prompt", "new", "settings", "message"),
    [
        (torch.zeros((1, 250), dtype=torch.long), 10, {}, "exceeds the model's max_seq_len 256"),
        (torch.tensor([[1, 999]]), 2, {}, "outside 0..255"),
        (torch.zeros((1, 0), dtype=torch.long), 2, {}, "at least one token"),
        (torch.tensor([[1]]), 0, {}, "max_new_tokens must be >= 1"),
    ],
)
def test_bad_requests_are_refused_naming_what_is_wrong(prompt, new, settings, message) -> None:
    gpt, cfg = model()
    with pytest.raises(ValueError, match=message):
        generate(gpt, cfg, prompt, new, **settings)


def test_sampling_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="temperature"):
        Sampling(temperature=-1)
    with pytest.raises(ValueError, match="top_k"):
        Sampling(top_k=0)
