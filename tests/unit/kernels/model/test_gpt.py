"""The GPT decoder, presets, FLOPs accounting and pipeline cutting, in one process."""

from __future__ import annotations

import pytest
import torch

from myolo.kernels.model import GPT, ModelConfig, flops_per_token, mfu, preset
from myolo.kernels.model.flops import param_count, peak_flops
from myolo.kernels.model.gpt import apply_rotary, rotary_tables
from myolo.kernels.parallel.pp import cut_stage, layer_ranges, stage_ids

torch.set_num_threads(1)


def tiny(**kw) -> GPT:
    torch.manual_seed(0)
    return GPT(preset("tiny", **kw))


def test_forward_shape_and_finite() -> None:
    model = tiny()
    tokens = torch.randint(0, 256, (2, 16))
    logits = model(tokens)
    assert logits.shape == (2, 16, 256)
    assert torch.isfinite(logits).all()


def test_attention_is_causal() -> None:
    """Changing a later token must not change the logits of earlier positions."""
    model = tiny()
    a = torch.randint(0, 256, (1, 12))
    b = a.clone()
    b[0, 8:] = (b[0, 8:] + 1) % 256
    la, lb = model(a), model(b)
    torch.testing.assert_close(la[:, :8], lb[:, :8])
    assert not torch.allclose(la[:, 8:], lb[:, 8:])


def test_rotary_scores_depend_on_the_distance_between_positions_only() -> None:
    """Rotary turns q.k into a function of (n - m): the same at any offset, different at another distance."""
    cfg = preset("tiny")
    cos, sin = rotary_tables(cfg)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(cfg.head_dim, generator=g), torch.randn(cfg.head_dim, generator=g)
    scale = float(q.norm() * k.norm())

    def at(v: torch.Tensor, pos: int) -> torch.Tensor:
        x = torch.zeros(1, 32, 1, cfg.head_dim)  # (batch, seq, heads, head_dim), v at position pos
        x[0, pos, 0] = v
        return apply_rotary(x, cos, sin)[0, pos, 0]

    def score(m: int, n: int) -> float:
        return float(at(q, m) @ at(k, n))

    for distance in (0, 1, 2, 5, 9):
        same = [score(m + distance, m) for m in (0, 3, 11, 20)]
        assert max(same) - min(same) <= 1e-5 * scale, (distance, same)
    by_distance = [score(d, 0) for d in range(16)]
    assert max(by_distance) - min(by_distance) > 0.2 * scale, by_distance  # observed 0.58: far above rounding


def test_token_order_reaches_the_logits_through_rotary() -> None:
    """Swapping two earlier tokens changes the last position's logits, and only because of the positions.

    One layer, distinct tokens: the last position attends over the same (key, value) pairs in either order,
    so without rotary (identity tables) its logits are the same up to rounding. A larger init makes the
    attention peaked, so the rotary difference is far above rounding.
    """
    torch.manual_seed(0)
    model = GPT(preset("tiny", n_layers=1, init_std=0.1))
    a = torch.tensor([[5, 9, 13, 17, 21, 25, 29, 33]])
    b = a[:, [0, 2, 1, 3, 4, 5, 6, 7]]
    with torch.no_grad():
        with_rotary = model(a)[0, -1], model(b)[0, -1]
        model.rope_cos.fill_(1.0)
        model.rope_sin.zero_()
        without = model(a)[0, -1], model(b)[0, -1]
    scale = float(with_rotary[0].abs().max())
    assert float((with_rotary[0] - with_rotary[1]).abs().max()) > 1e-2 * scale  # seen: 0.2
    assert float((without[0] - without[1]).abs().max()) < 1e-5 * scale  # seen: 4e-7


def test_fused_residual_path_equals_unfused() -> None:
    model = tiny()
    tokens = torch.randint(0, 256, (2, 10))
    fused = model(tokens)
    for block in model.layers.values():
        block.fuse_residual = False
    torch.testing.assert_close(model(tokens), fused, rtol=1e-6, atol=1e-6)


def test_grouped_kv_heads() -> None:
    model = tiny(n_kv_heads=2)
    assert model.layers["0"].attention.wk.weight.shape == (2 * 16, 64)
    assert model(torch.randint(0, 256, (1, 8))).shape == (1, 8, 256)


def test_param_count_matches_model() -> None:
    for kw in ({}, {"n_kv_heads": 2}, {"ffn_hidden": 96}):
        model = tiny(**kw)
        assert param_count(model.cfg, include_embedding=True) == model.num_params()
        assert param_count(model.cfg) == model.num_params(exclude_embedding=True)


def test_presets_and_overrides() -> None:
    small = preset("small")
    assert 100e6 < param_count(small, include_embedding=True) < 180e6
    assert 0.9e9 < param_count(preset("1b"), include_embedding=True) < 1.6e9
    assert preset("tiny", n_layers=2).n_layers == 2
    with pytest.raises(ValueError, match="unknown model preset 'huge'"):
        preset("huge")
    with pytest.raises(ValueError, match=r"unknown model option\(s\) \['depth'\]"):
        preset("tiny", depth=3)
    with pytest.raises(ValueError, match=r"divisible by model\.n_heads"):
        ModelConfig(dim=100, n_heads=3)


def test_flops_and_mfu() -> None:
    cfg = preset("small")
    f = flops_per_token(cfg, 1024)
    assert f == 6 * param_count(cfg) + 12 * cfg.n_layers * cfg.n_heads * cfg.head_dim * 1024
    assert mfu(cfg, 1024, 1000.0, None, 1) is None
    assert mfu(cfg, 1024, 1000.0, 1e15, 2) == pytest.approx(f * 1000 / 2e15)
    assert peak_flops("NVIDIA H200") == 989e12
    assert peak_flops(None) is None


def test_layer_ranges_cover_layers_once() -> None:
    assert layer_ranges(5, 2) == [range(0, 3), range(3, 5)]
    assert [len(r) for r in layer_ranges(12, 4)] == [3, 3, 3, 3]
    assert stage_ids(1, 2, 2) == [1, 3]
    with pytest.raises(ValueError, match="lower pp"):
        layer_ranges(2, 4)


@pytest.mark.parametrize("n_stages", [2, 4])
def test_stages_compose_to_full_model(n_stages: int) -> None:
    """Running the stages one after the other is the full model, with parameter names preserved."""
    model = tiny()
    tokens = torch.randint(0, 256, (2, 8))
    parts = [cut_stage(model, s, n_stages) for s in range(n_stages)]
    h = tokens
    for part in parts:
        h = part(h)
    torch.testing.assert_close(h, model(tokens))
    names = [n for p in parts for n, _ in p.named_parameters()]
    assert sorted(names) == sorted(n for n, _ in model.named_parameters())


def test_compile_per_block_matches_eager() -> None:
    """``--compile`` (torch.compile on each block) trains to the same losses as eager in one process."""
    from myolo.kernels.train.config import JobConfig
    from myolo.kernels.train.loop import run
    from myolo.kernels.train.records import StepRecord

    def losses(compile_blocks: bool) -> list[float]:
        job = JobConfig.from_fields(
            {"optimizer.steps": 3, "data.global_batch": 4, "data.seq_len": 32, "runtime.compile": compile_blocks}
        )
        return [r.loss for r in run(job).records if isinstance(r, StepRecord)]

    eager, compiled = losses(False), losses(True)
    assert compiled == pytest.approx(eager, rel=1e-5)
    assert eager[0] != eager[-1]
