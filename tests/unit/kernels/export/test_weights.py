"""Weights files: what the export writes is safetensors the library reads back, the same bytes for the same
weights, replaced atomically; loading one into a model refuses any name or shape that is not the model's."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import pytest
import safetensors
import safetensors.torch
import torch

from myolo.kernels.export.weights import (
    WeightsError,
    describe_model,
    load_weights,
    read_weights,
    weights_metadata,
    write_weights,
)
from myolo.kernels.model import GPT, preset


def tiny_weights(seed: int = 0) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    return {n: t.clone() for n, t in GPT(preset("tiny")).state_dict().items()}


def test_written_weights_read_back_equal_with_their_metadata(tmp_path: Path) -> None:
    weights = tiny_weights()
    out = tmp_path / "sub" / "model.safetensors"
    written = write_weights(weights, out, weights_metadata("tiny", 7, {"n_layers": 4}))
    assert written.path == out and written.size_bytes == out.stat().st_size
    assert written.sha256 == hashlib.sha256(out.read_bytes()).hexdigest()
    loaded = safetensors.torch.load_file(out)  # the library's own reader
    assert loaded.keys() == weights.keys()
    assert all(torch.equal(loaded[n], weights[n]) for n in weights)
    with safetensors.safe_open(str(out), framework="pt") as f:
        assert f.metadata() == {
            "format": "pt",
            "myolo.model": "tiny",
            "myolo.model_args": '{"n_layers": 4}',
            "myolo.step": "7",
        }
    assert [p.name for p in out.parent.iterdir()] == ["model.safetensors"]  # no temporary file left


def test_the_same_weights_give_the_same_bytes(tmp_path: Path) -> None:
    meta = weights_metadata("tiny", 3)
    a = write_weights(tiny_weights(), tmp_path / "a.safetensors", meta)
    b = write_weights(dict(reversed(tiny_weights().items())), tmp_path / "b.safetensors", dict(reversed(meta.items())))
    assert a.sha256 == b.sha256
    c = write_weights(tiny_weights(seed=1), tmp_path / "c.safetensors", meta)
    assert c.sha256 != a.sha256


def test_the_header_is_padded_to_8_bytes_and_dtypes_other_than_fp32_survive(tmp_path: Path) -> None:
    weights = {
        "bf": torch.arange(6, dtype=torch.bfloat16).view(2, 3),
        "half": torch.tensor([1.5], dtype=torch.float16),
        "ids": torch.tensor([[1, 2]], dtype=torch.int64),
        "empty": torch.zeros(0, 4),
        "scalar": torch.tensor(2.0),
    }
    out = write_weights(weights, tmp_path / "w.safetensors", {"format": "pt"}).path
    raw = out.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    assert length % 8 == 0 and json.loads(raw[8 : 8 + length])["__metadata__"] == {"format": "pt"}
    loaded = safetensors.torch.load_file(out)
    for name, t in weights.items():
        assert loaded[name].dtype == t.dtype and torch.equal(loaded[name], t), name


def test_a_rewrite_replaces_the_file_whole(tmp_path: Path) -> None:
    out = tmp_path / "model.safetensors"
    write_weights(tiny_weights(), out, weights_metadata("tiny", 1))
    second = write_weights(tiny_weights(seed=5), out, weights_metadata("tiny", 2))
    assert hashlib.sha256(out.read_bytes()).hexdigest() == second.sha256
    assert read_weights(out)[1]["myolo.step"] == "2"


def test_load_weights_copies_every_tensor_into_the_model(tmp_path: Path) -> None:
    out = write_weights(tiny_weights(seed=3), tmp_path / "m.safetensors", weights_metadata("tiny", 1)).path
    torch.manual_seed(0)
    model = GPT(preset("tiny"))
    meta = load_weights(model, out, describe_model("tiny"))
    assert meta["myolo.step"] == "1"
    want = tiny_weights(seed=3)
    assert all(torch.equal(t, want[n]) for n, t in model.state_dict().items())


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda w: w.pop("layers.1.feed_forward.w2.weight"), "has no tensor 'layers.1.feed_forward.w2.weight'"),
        (lambda w: w.update(extra=torch.zeros(1)), "holds tensor 'extra', which model 'tiny' does not have"),
        (lambda w: w.update({"norm.weight": torch.ones(65)}), "tensor 'norm.weight' has shape [65] but model 'tiny'"),
    ],
)
def test_a_mismatch_names_the_tensor_and_the_model(tmp_path: Path, change, says: str) -> None:
    weights = tiny_weights()
    change(weights)
    out = write_weights(weights, tmp_path / "m.safetensors", weights_metadata("tiny", 1)).path
    model = GPT(preset("tiny"))
    before = {n: t.clone() for n, t in model.state_dict().items()}
    with pytest.raises(WeightsError) as caught:
        load_weights(model, out, describe_model("tiny"))
    assert says in str(caught.value) and "same model preset and model_args" in str(caught.value)
    assert all(torch.equal(t, before[n]) for n, t in model.state_dict().items())  # checked before any copy


def test_weights_of_another_model_say_which_it_was(tmp_path: Path) -> None:
    out = write_weights(tiny_weights(), tmp_path / "m.safetensors", weights_metadata("tiny", 1)).path
    small = GPT(preset("tiny", n_layers=2))
    with pytest.raises(WeightsError) as caught:
        load_weights(small, out, describe_model("tiny", {"n_layers": 2}))
    message = str(caught.value)
    assert "model 'tiny' with model_args {\"n_layers\": 2}" in message
    assert "(the file was written for model 'tiny')" in message


def test_an_unreadable_file_is_a_weights_error(tmp_path: Path) -> None:
    with pytest.raises(WeightsError, match="does not exist"):
        read_weights(tmp_path / "missing.safetensors")
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
    with pytest.raises(WeightsError, match="not readable safetensors"):
        read_weights(bad)
