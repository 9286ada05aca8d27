"""The watermark round trip on a tiny model: marked verifies, a wrong key and an unmarked model do not; the mark
survives 8-bit quantization and, with the reference weights, a neuron permutation; nothing stores the key."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from scipy import stats as scipy_stats

from myolo.kernels.model import GPT, preset
from myolo.kernels.quantization import PTQConverter
from myolo.kernels.watermark import DigitalWatermark, WatermarkKey, WatermarkSettings
from myolo.kernels.watermark import stats as wm_stats
from myolo.kernels.watermark.carrier import plan

KEY = "correct horse battery staple"


def batches(seed: int = 1) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    while True:
        x = torch.randint(0, 256, (4, 17), generator=g)
        yield x[:, :-1], x[:, 1:]


def fresh(seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(preset("tiny", n_layers=2, max_seq_len=32))


@pytest.fixture(scope="module")
def marked() -> tuple[GPT, GPT, DigitalWatermark]:
    model = fresh()
    original = copy.deepcopy(model)
    mark = DigitalWatermark.generate(key=KEY)
    report = mark.apply(model, batches(), steps=60, lr=1e-3)
    assert report.bits_at_margin == report.bits == 256
    assert report.min_margin >= mark.settings.margin
    return model, original, mark


def test_the_marked_model_verifies_and_the_others_do_not(marked) -> None:
    model, original, mark = marked
    good = mark.verify(model)
    assert good.marked and good.matched == 256 and good.ber == 0.0
    assert good.p_value == pytest.approx(2.0**-256) and good.p_value < good.alpha
    assert good.log10_p == pytest.approx(-256 * np.log10(2.0))
    for verdict in (DigitalWatermark.generate(key="another key").verify(model), mark.verify(original)):
        assert not verdict.marked
        assert verdict.matched < verdict.threshold_bits and verdict.p_value > 1e-6


def test_eight_bit_quantization_keeps_the_mark(marked) -> None:
    model, _, mark = marked
    calib = torch.randint(0, 256, (8, 32), generator=torch.Generator().manual_seed(3))
    quant = PTQConverter(model=model, calib_dataset=calib, bit_width=8, scheme="rtn").convert()
    got = mark.verify(quant)
    assert got.marked and got.matched >= 250


def test_a_permutation_erases_the_mark_unless_the_reference_realigns_it(marked) -> None:
    model, _, mark = marked
    attacked = copy.deepcopy(model)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        dim = attacked.cfg.dim
        residual = torch.randperm(dim, generator=g)
        for name, p in attacked.named_parameters():  # the residual stream's dimensions, everywhere
            if name.endswith(("wq.weight", "wk.weight", "wv.weight", "w1.weight", "w3.weight")) or name in (
                "output.weight",
                "tok_embeddings.weight",
            ):
                p.copy_(p[:, residual])
            elif name.endswith(("wo.weight", "w2.weight")) or p.ndim == 1:
                p.copy_(p[residual])
        for block in attacked.layers.values():  # and each block's hidden units
            ff = block.feed_forward
            units = torch.randperm(ff.w1.weight.shape[0], generator=g)
            ff.w1.weight.copy_(ff.w1.weight[units])
            ff.w3.weight.copy_(ff.w3.weight[units])
            ff.w2.weight.copy_(ff.w2.weight[:, units])
        x = torch.randint(0, 256, (2, 16), generator=g)
        assert torch.allclose(attacked(x), model(x), atol=1e-4)  # the same function
    assert not mark.verify(attacked).marked
    reference = {n: t.clone() for n, t in model.state_dict().items()}
    back = mark.verify(attacked, reference)
    assert back.marked and back.matched == 256
    assert back.realigned["residual"] > 0 and back.realigned["layers.0.feed_forward"] > 0
    assert mark.verify(model, reference).realigned == dict.fromkeys(back.realigned, 0)


def test_the_key_is_stored_nowhere(marked) -> None:
    model, _, mark = marked
    secret = KEY.encode()
    assert KEY not in repr(mark) and KEY not in repr(mark.key) and secret.hex() not in repr(mark.key)
    record = mark.record()
    assert record.commitment == mark.commitment and KEY not in str(record)
    blob = b"".join(t.numpy().tobytes() for t in model.state_dict().values())
    assert secret not in blob


def test_carriers_are_dealt_evenly_and_come_from_the_key_alone() -> None:
    model = fresh()
    key = WatermarkKey.of(KEY)
    p = plan(key, model, 256, 0.5, 1 << 22)
    counts = torch.bincount(p.bit_of, minlength=256)
    assert int(counts.max() - counts.min()) <= 1
    assert set(p.sign.unique().tolist()) == {-1.0, 1.0}
    again = plan(WatermarkKey.of(KEY), fresh(seed=5), 256, 0.5, 1 << 22)  # other weights, same shape
    assert p.modules == again.modules and torch.equal(p.bit_of, again.bit_of) and torch.equal(p.sign, again.sign)
    other = plan(WatermarkKey.of("other"), model, 256, 0.5, 1 << 22)
    assert not torch.equal(p.bit_of, other.bit_of)


def test_the_null_is_the_stated_binomial() -> None:
    """Matched bits of an unmarked model over many keys: the randomized PIT of each count is uniform (KS)."""
    model = fresh()
    rng = np.random.default_rng(0)
    pits = [
        wm_stats.randomized_pit(DigitalWatermark.generate(key=f"k{i}").verify(model).matched, 256, rng.uniform())
        for i in range(200)
    ]
    assert scipy_stats.kstest(pits, "uniform").pvalue > 1e-3


def test_the_tail_arithmetic() -> None:
    assert wm_stats.p_value(256, 256) == pytest.approx(2.0**-256)
    assert wm_stats.p_value(0, 256) == pytest.approx(1.0)
    k = wm_stats.threshold_bits(256, 1e-6)
    assert wm_stats.p_value(k, 256) < 1e-6 <= wm_stats.p_value(k - 1, 256)
    assert wm_stats.log10_p(1024, 1024) == pytest.approx(-1024 * np.log10(2.0))
    with pytest.raises(ValueError, match="matched"):
        wm_stats.p_value(300, 256)


@pytest.mark.parametrize(
    ("field", "value"), [("bits", 8), ("share", 0.0), ("margin", -1.0), ("alpha", 0.7), ("max_coords", 100)]
)
def test_bad_settings_name_the_field(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=f"watermark.{field} must be"):
        WatermarkSettings(**{field: value})


def test_the_data_running_out_is_an_error() -> None:
    def two() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        it = batches()
        yield next(it)
        yield next(it)

    with pytest.raises(ValueError, match="ran out after 2 of 5 steps"):
        DigitalWatermark.generate(key=KEY).apply(fresh(), two(), steps=5)
