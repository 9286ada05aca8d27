"""``python -m myolo.kernels.cli.quantize`` by hand: an export in, a quantized file and a manifest that compares."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner
from typer.testing import Result as CliResult

from myolo.kernels.cli import app
from myolo.kernels.cli.quantize import HELP, quantize_command
from myolo.kernels.export.weights import weights_metadata, write_weights
from myolo.kernels.model import GPT, preset
from myolo.kernels.quantization import load_quantized
from myolo.kernels.quantization.overlap import shared_runs

ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("quant")
    torch.manual_seed(0)
    export = d / "tiny.safetensors"
    write_weights(GPT(preset("tiny")).state_dict(), export, weights_metadata("tiny", 7))
    tokens = torch.randint(0, 256, (40_000,), generator=torch.Generator().manual_seed(1)).to(torch.int16)
    (d / "calib.bin").write_bytes(tokens[:20_000].numpy().tobytes())
    (d / "eval.bin").write_bytes(tokens[20_000:].numpy().tobytes())
    (d / "cut.bin").write_bytes(tokens[100:4_000].numpy().tobytes())  # cut from the calibration tokens
    return {"export": export, "calib": d / "calib.bin", "eval": d / "eval.bin", "cut": d / "cut.bin", "dir": d}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "myolo.kernels.cli.quantize", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def refused(*args: str) -> CliResult:
    """The command in-process, for refusals (exit code and stderr; no interpreter started per case)."""
    return CliRunner().invoke(app.build(quantize_command, HELP), list(args))


SMALL = ["--seq-len", "32", "--calib-sequences", "16", "--eval-batches", "2", "--eval-batch-size", "4"]


def test_a_gptq_quantization_writes_the_file_and_a_manifest_with_both_evaluations(files) -> None:
    out = files["dir"] / "q.safetensors"
    proc = run(
        str(files["export"]), "-o", str(out), "--scheme", "gptq", "--group-size", "32",
        "--calib", str(files["calib"]), "--eval", str(files["eval"]), *SMALL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads(proc.stdout)
    assert json.loads((files["dir"] / "q.safetensors.json").read_text()) == manifest
    q = manifest["quantization"]
    assert (q["scheme"], q["bits"], q["group_size"], q["layers"]) == ("gptq", 4, 32, 28)
    assert 4.0 < q["bits_per_weight"] < 5.1  # 4 bits and a bf16 scale and zero per 32 weights: 5
    assert q["calib_tokens"] == 16 * 32 and len(q["calib_sha256"]) == 64
    assert manifest["eval"]["dataset_sha256"] == q["source_eval"]["dataset_sha256"]
    assert manifest["eval"]["tokens"] == q["source_eval"]["tokens"] == 2 * 4 * 32
    assert manifest["steps"] == 7 and manifest["init_from"] == str(files["export"].resolve())
    _, _, spec = load_quantized(out)
    assert spec.source_sha256 == q["source_sha256"] and spec.calib_sha256 == q["calib_sha256"]
    assert "quantize: block 3: feed_forward.w2 quantized" in proc.stderr


def test_calibration_and_evaluation_sets_are_never_the_same_tokens(files) -> None:
    calib = torch.frombuffer(bytearray(files["calib"].read_bytes()), dtype=torch.int16).to(torch.int64)
    held = torch.frombuffer(bytearray(files["eval"].read_bytes()), dtype=torch.int16).to(torch.int64)
    assert shared_runs([calib], [held]) == (0, len(held) - 31)  # the fixture's split is disjoint
    out = str(files["dir"] / "bad.safetensors")
    same = refused(
        str(files["export"]), "-o", out, "--calib", str(files["calib"]), "--eval", str(files["calib"]), *SMALL
    )
    assert same.exit_code == 2 and "are the same data" in same.stderr
    cut = refused(str(files["export"]), "-o", out, "--calib", str(files["calib"]), "--eval", str(files["cut"]), *SMALL)
    assert cut.exit_code == 2 and "runs of 32 tokens (100%)" in cut.stderr, cut.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--scheme", "gptq"], "needs calib_dataset"),
        (["--scheme", "awq"], "scheme 'awq' is not one of"),
        (["--bits", "3", "--scheme", "rtn"], "bit_width must be 4 or 8"),
        (["--scheme", "rtn", "--group-size", "128"], "use one of [32, 64]"),
    ],
)
def test_bad_options_exit_2_naming_them(files, args: list[str], says: str) -> None:
    proc = refused(str(files["export"]), "-o", str(files["dir"] / "x.safetensors"), *args)
    assert proc.exit_code == 2, proc.stderr
    assert says in proc.stderr and "Traceback" not in proc.stderr
