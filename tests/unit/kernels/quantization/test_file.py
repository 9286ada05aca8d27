"""The quantized file: the same bytes for the same model, read back to the same outputs, refused when wrong."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import msgspec
import pytest
import torch

from myolo.kernels.export.weights import WeightsError, read_weights, write_weights
from myolo.kernels.infer.load import load_model
from myolo.kernels.model import GPT, preset
from myolo.kernels.quantization import PTQConverter, load_quantized, save_quantized
from myolo.kernels.quantization.file import META_QUANT


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> tuple[Path, GPT, PTQConverter]:
    torch.manual_seed(0)
    gpt = GPT(preset("tiny")).eval()
    conv = PTQConverter(model=gpt, bit_width=4, scheme="rtn", group_size=32, model_name="tiny")
    quant = conv.convert()
    path = tmp_path_factory.mktemp("q") / "tiny-int4.safetensors"
    save_quantized(quant, conv.spec, path)
    return path, quant, conv


@torch.inference_mode()
def test_a_saved_model_loads_back_to_the_same_outputs(saved) -> None:
    path, quant, conv = saved
    back, cfg, spec = load_quantized(path)
    x = torch.randint(0, 256, (2, 16))
    assert torch.equal(back(x), quant(x))
    assert spec == conv.spec and cfg == preset("tiny")
    via_infer, _ = load_model(path)  # myolo-generate's loader knows quantized files
    assert torch.equal(via_infer(x), quant(x))


def test_the_file_is_deterministic_and_holds_packed_codes(saved, tmp_path: Path) -> None:
    path, quant, conv = saved
    again = tmp_path / "again.safetensors"
    save_quantized(quant, conv.spec, again)
    assert again.read_bytes() == path.read_bytes()
    tensors, metadata = read_weights(path)
    assert tensors["layers.0.attention.wq.qweight"].shape == (64, 32)  # 64 x 64 codes, two a byte
    assert tensors["layers.0.attention.wq.scales"].dtype == torch.bfloat16
    assert tensors["tok_embeddings.weight"].dtype == torch.float32
    meta = json.loads(metadata[META_QUANT])
    assert (meta["scheme"], meta["bits"], meta["group_size"], meta["model"]) == ("rtn", 4, 32, "tiny")


def rewrite(path: Path, out: Path, *, tensors=None, metadata=None, drop: str | None = None) -> Path:
    t, m = read_weights(path)
    t.update(tensors or {})
    m.update(metadata or {})
    if drop:
        del t[drop]
    write_weights(t, out, m)
    return out


def test_refusals_name_the_tensor_or_the_field(saved, tmp_path: Path) -> None:
    path = saved[0]
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(WeightsError, match="not readable safetensors"):
        load_quantized(cut)
    wq = "layers.0.attention.wq.qweight"
    bad = rewrite(path, tmp_path / "shape.safetensors", tensors={wq: torch.zeros(64, 30, dtype=torch.uint8)})
    with pytest.raises(WeightsError, match=f"tensor '{wq}' has shape \\[64, 30\\]"):
        load_quantized(bad)
    bad = rewrite(path, tmp_path / "missing.safetensors", drop="layers.1.feed_forward.w2.scales")
    with pytest.raises(WeightsError, match=r"has no tensor 'layers\.1\.feed_forward\.w2\.scales'"):
        load_quantized(bad)
    bad = rewrite(path, tmp_path / "dtype.safetensors", tensors={wq: torch.zeros(64, 32, dtype=torch.float32)})
    with pytest.raises(WeightsError, match=f"tensor '{wq}' is torch.float32, expected torch.uint8"):
        load_quantized(bad)
    nan = torch.full((64, 2), float("nan"), dtype=torch.bfloat16)
    bad = rewrite(path, tmp_path / "nan.safetensors", tensors={"layers.0.attention.wq.scales": nan})
    with pytest.raises(WeightsError, match="holds NaN or infinite values"):
        load_quantized(bad)


def spec_with(conv: PTQConverter, **changes) -> str:
    raw = msgspec.to_builtins(conv.spec)
    raw.update(changes)
    return json.dumps(raw)


def test_a_spec_that_does_not_match_the_model_is_refused(saved, tmp_path: Path) -> None:
    path, _, conv = saved
    layers = msgspec.to_builtins(conv.spec)["layers"]
    layers["layers.0.attention.wq"]["shape"] = [64, 128]
    cases = {
        "shape": (spec_with(conv, layers=layers), r"layers\['layers.0.attention.wq'\].shape is \[64, 128\]"),
        "args": (spec_with(conv, model_args={"dim": 128}), r"is \[64, 64\] but the model's layer is \[128, 128\]"),
        "bits": (spec_with(conv, bits="four"), r"myolo.quant is invalid: Expected `int`, got `str` - at `\$.bits`"),
        "format": (spec_with(conv, format=9), "format is 9; this version reads format 1"),
        "json": ("{not json", "is not JSON"),
    }
    for name, (text, says) in cases.items():
        bad = rewrite(path, tmp_path / f"{name}.safetensors", metadata={META_QUANT: text})
        with pytest.raises(WeightsError, match=says):
            load_quantized(bad)
    with pytest.raises(WeightsError, match="was quantized from model 'tiny', not the 'small' asked for"):
        load_quantized(path, expect={"model": "small"})


def test_a_float_export_is_not_a_quantized_model(tmp_path: Path) -> None:
    plain = tmp_path / "plain.safetensors"
    write_weights(GPT(preset("tiny")).state_dict(), plain, {"myolo.model": "tiny"})
    with pytest.raises(WeightsError, match="is not a quantized model"):
        load_quantized(plain)


def test_the_header_length_is_what_safetensors_reads(saved) -> None:
    path, _, _ = saved
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert json.loads(raw[8 : 8 + n])["__metadata__"][META_QUANT]
