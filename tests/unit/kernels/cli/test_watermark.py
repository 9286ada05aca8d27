"""``python -m myolo.kernels.cli.watermark`` by hand: keygen, embed, verify (exit 0 marked, 3 not), and the refusals."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from myolo.kernels.cli.watermark import EXIT_NOT_MARKED, app
from myolo.kernels.export.manifest import manifest_path
from myolo.kernels.export.weights import write_weights
from myolo.kernels.infer.load import file_metadata
from myolo.kernels.quantization.pipeline import QuantizeSpec, quantize_file
from myolo.kernels.watermark.header import META_WATERMARK, file_watermark
from tests.support.kernels.marked import tiny_export, token_file

runner = CliRunner()


def invoke(*args: str) -> Result:
    return runner.invoke(app, list(args))


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("wm")
    export = tiny_export(d / "tiny.safetensors")
    token_file(d / "train.bin", 30_000, seed=1)
    token_file(d / "eval.bin", 10_000, seed=2)
    key = d / "owner.key"
    out = invoke("keygen", str(key))
    assert out.exit_code == 0, out.output
    assert "commitment" in out.output and oct(key.stat().st_mode & 0o777) == "0o600"
    marked = d / "marked.safetensors"
    out = invoke(
        "embed", str(export), "--key-file", str(key), "--data", str(d / "train.bin"), "--output", str(marked),
        "--steps", "40", "--lr", "1e-3", "--batch", "4", "--seq-len", "32", "--eval", str(d / "eval.bin"),
        "--eval-batches", "2",
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    quantized = d / "q8.safetensors"
    quantize_file(QuantizeSpec(source=str(marked), output=str(quantized), bits=8, scheme="rtn"))
    return {"export": export, "key": key, "marked": marked, "quantized": quantized, "dir": d}


def test_embed_writes_a_marked_export_whose_records_hold_only_the_commitment(files) -> None:
    manifest = json.loads(manifest_path(files["marked"]).read_text())
    secret = files["key"].read_text().strip()
    assert manifest["watermark"]["bits"] == 256 and len(manifest["watermark"]["commitment"]) == 64
    assert manifest["init_from"] == str(files["export"].resolve()) and manifest["steps"] == 7 + 40
    header = file_metadata(files["marked"])
    assert (
        file_watermark(header) is not None and file_watermark(header).commitment == manifest["watermark"]["commitment"]
    )
    for text in (manifest_path(files["marked"]).read_text(), json.dumps(header)):
        assert secret not in text


def test_verify_says_marked_for_the_key_and_not_for_another(files, tmp_path: Path) -> None:
    out = invoke("verify", str(files["marked"]), "--key-file", str(files["key"]))
    assert out.exit_code == 0, out.output
    assert "256/256 bits match" in out.output and "MARKED" in out.output
    other = tmp_path / "other.key"
    assert invoke("keygen", str(other)).exit_code == 0
    refused = invoke("verify", str(files["marked"]), "--key-file", str(other))
    assert refused.exit_code == 2 and "not the one that marked this model" in refused.output
    unmarked = invoke("verify", str(files["export"]), "--key-file", str(files["key"]), "--json")
    assert unmarked.exit_code == EXIT_NOT_MARKED
    result = json.loads(unmarked.output)
    assert result["marked"] is False and result["p_value"] > 1e-6


def test_a_quantized_copy_names_and_keeps_the_mark(files) -> None:
    export = json.loads(manifest_path(files["quantized"]).read_text())
    assert export["watermark"] == json.loads(file_metadata(files["marked"])[META_WATERMARK])
    assert file_watermark(file_metadata(files["quantized"])) == file_watermark(file_metadata(files["marked"]))
    out = invoke("verify", str(files["quantized"]), "--key-file", str(files["key"]), "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["matched"] >= 250


def test_a_stripped_header_is_read_with_the_settings_given(files, tmp_path: Path) -> None:
    from myolo.kernels.export.weights import read_weights

    tensors, meta = read_weights(files["marked"])
    stripped = tmp_path / "stripped.safetensors"
    write_weights(tensors, stripped, {k: v for k, v in meta.items() if k != META_WATERMARK})
    out = invoke("verify", str(stripped), "--key-file", str(files["key"]))
    assert out.exit_code == 0 and "names no mark" in out.output


def test_refusals_name_the_input(files, tmp_path: Path) -> None:
    loose = tmp_path / "loose.key"
    loose.write_text("ab" * 32 + "\n")
    os.chmod(loose, 0o644)
    out = invoke("verify", str(files["marked"]), "--key-file", str(loose))
    assert out.exit_code == 2 and "chmod 600" in out.output
    wrong = invoke("verify", str(files["marked"]), "--key-file", str(files["key"]), "--commitment", "0" * 64)
    assert wrong.exit_code == 2 and "not the one recorded" in wrong.output
    again = invoke("keygen", str(files["key"]))
    assert again.exit_code == 2 and "never overwritten" in again.output
    quantized = invoke(
        "embed", str(files["quantized"]), "--key-file", str(files["key"]), "--data",
        str(files["dir"] / "train.bin"), "--output", str(tmp_path / "x.safetensors"),
    )  # fmt: skip
    assert quantized.exit_code == 2 and "quantized model" in quantized.output
