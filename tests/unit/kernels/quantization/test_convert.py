"""The seed's API on the trainer's GPT: every scheme returns a model that runs, close to the float one."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from myolo.common.digest import sha256_file
from myolo.kernels.model import GPT, preset
from myolo.kernels.quantization import PTQConverter
from myolo.kernels.quantization.calibrate import calibration_set
from myolo.kernels.quantization.linear import QuantLinear


@pytest.fixture(scope="module")
def gpt() -> GPT:
    torch.manual_seed(0)
    return GPT(preset("tiny")).eval()


def tokens(rows: int, seq: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 256, (rows, seq), generator=torch.Generator().manual_seed(seed))


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize(
    ("scheme", "bits", "group", "bound"),
    [
        ("rtn", 8, None, 0.01),
        ("rtn", 4, 64, 0.15),
        ("gptq", 4, 64, 0.15),
        ("hqq", 4, 64, 0.15),
        ("dynamic_fixed_point", 8, None, 0.05),
        ("dynamic_fixed_point", 4, None, 1.0),
    ],
)
@torch.inference_mode()
def test_every_scheme_returns_a_model_that_runs_near_the_float_one(gpt, scheme, bits, group, bound) -> None:
    before = {n: p.clone() for n, p in gpt.state_dict().items()}
    conv = PTQConverter(model=gpt, calib_dataset=tokens(16, 64, 1), bit_width=bits, scheme=scheme, group_size=group)
    quant = conv.convert()
    x = tokens(2, 48, 2)
    assert relative_error(quant(x), gpt(x)) < bound
    assert all(torch.equal(before[n], p) for n, p in gpt.state_dict().items())  # the source is untouched
    assert len(conv.spec.layers) == 4 * 7  # 4 blocks x q, k, v, o, w1, w2, w3
    assert isinstance(quant.layers["0"].attention.wq, QuantLinear)
    assert not isinstance(quant.output, QuantLinear)  # the head stays in float by default
    assert conv.spec.calib_sha256 and conv.spec.calib_tokens == 16 * 64
    assert all(r.relative_error < 1 for r in conv.report.layers)


@torch.inference_mode()
def test_gptq_layer_by_layer_beats_round_to_nearest_on_tokens_it_did_not_see(gpt) -> None:
    calib, held = tokens(32, 64, 1), tokens(4, 64, 9)
    ref = gpt(held)
    rtn = PTQConverter(model=gpt, bit_width=4, scheme="rtn", group_size=32).convert()
    opt = PTQConverter(model=gpt, calib_dataset=calib, bit_width=4, scheme="gptq", group_size=32).convert()
    assert relative_error(opt(held), ref) < relative_error(rtn(held), ref)


def test_the_head_is_quantized_when_asked(gpt) -> None:
    conv = PTQConverter(model=gpt, bit_width=8, scheme="rtn", layers=("layers.*", "output"))
    assert isinstance(conv.convert().output, QuantLinear) and "output" in conv.spec.layers
    only = PTQConverter(model=gpt, bit_width=4, scheme="rtn", group_size=64, layers=("layers.*.feed_forward.*",))
    only.convert()
    assert sorted(only.spec.layers)[:3] == [
        "layers.0.feed_forward.w1",
        "layers.0.feed_forward.w2",
        "layers.0.feed_forward.w3",
    ]


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"scheme": "awq"}, "scheme 'awq' is not one of"),
        ({"bit_width": 3}, "bit_width must be 4 or 8"),
        ({"scheme": "gptq"}, "scheme 'gptq' needs calib_dataset"),
        ({"scheme": "rtn", "group_size": 128}, "group_size 128 does not divide layer layers.0.attention.wq's 64"),
        ({"scheme": "rtn", "layers": ("nothing.*",)}, "no linear layer matches"),
    ],
)
def test_bad_settings_are_refused_naming_them(gpt, kwargs, says) -> None:
    with pytest.raises(ValueError, match=says):
        PTQConverter(model=gpt, **kwargs)


def test_calibration_comes_from_a_dataloader_a_token_file_or_a_tensor(gpt, tmp_path: Path) -> None:
    data = tokens(20, 33, 4)
    loader = DataLoader(TensorDataset(data[:, :-1], data[:, 1:]), batch_size=4)
    from_loader = calibration_set(loader, vocab_size=256, max_seq_len=256, max_sequences=10)
    assert from_loader.sequences == 10 and from_loader.batches[0].shape == (4, 32)
    path = tmp_path / "calib.bin"
    path.write_bytes(data.to(torch.int16).numpy().tobytes())
    from_file = calibration_set(path, vocab_size=256, max_seq_len=256, seq_len=32, max_sequences=8, batch=4)
    assert from_file.sha256 == sha256_file(path)[0] and from_file.sequences == 8
    assert calibration_set(data, vocab_size=256, max_seq_len=256).sequences == 20
    with pytest.raises(ValueError, match=r"calibration batch 0 is Tensor of shape .* dtype torch.float32"):
        calibration_set([torch.zeros(2, 4)], vocab_size=256, max_seq_len=256)
    with pytest.raises(ValueError, match=r"token id 300, outside the model.s vocabulary 0\.\.255"):
        calibration_set(torch.tensor([[1, 300]]), vocab_size=256, max_seq_len=256)
    with pytest.raises(ValueError, match="holds no tokens"):
        calibration_set([], vocab_size=256, max_seq_len=256)
