"""``myolo-generate`` as an operator runs it: an export in, text on stdout, speeds on stderr, clear refusals."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from myolo.kernels.cli import app
from myolo.kernels.cli.generate import HELP, generate_command
from myolo.kernels.export.weights import weights_metadata, write_weights
from myolo.kernels.infer.generate import generate
from myolo.kernels.infer.load import load_model
from myolo.kernels.model import GPT, preset

ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("gen") / "tiny.safetensors"
    write_weights(GPT(preset("tiny")).state_dict(), path, weights_metadata("tiny", 10))
    return path


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``myolo-generate ARGS`` as an operator runs it: stdout and stderr apart."""
    return subprocess.run(
        [sys.executable, "-m", "myolo.kernels.cli.generate", *args],
        input=stdin, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def refused(*args: str, stdin: str = "") -> Ran:
    """The command in-process, for refusals (exit code and stderr; no interpreter started per case)."""
    result = CliRunner().invoke(app.build(generate_command, HELP), list(args), input=stdin)
    return Ran(result.exit_code, result.stdout, result.stderr)


def test_a_prompt_from_stdin_is_continued_greedily_as_the_library_does(export: Path) -> None:
    proc = run(str(export), "-n", "12", "--tokens", stdin="104 101 108 108 111")
    assert proc.returncode == 0, proc.stderr
    gpt, cfg = load_model(export)
    expected = generate(gpt, cfg, torch.tensor([[104, 101, 108, 108, 111]]), 12).tokens[0]
    assert proc.stdout.split() == [str(t) for t in expected]
    assert "prefill 5 tokens" in proc.stderr and "decode 11 tokens" in proc.stderr and "tokens/s" in proc.stderr


def test_text_in_text_out_for_a_byte_level_model(export: Path, tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("def main():\n")
    proc = run(str(export), "--prompt-file", str(prompt), "-n", "8", "--temperature", "0.8", "--top-k", "20")
    assert proc.returncode == 0, proc.stderr
    assert 1 <= len(proc.stdout.encode("utf-8", errors="surrogateescape")) <= 8 * 3  # 8 bytes, some U+FFFD
    again = run(str(export), "--prompt-file", str(prompt), "-n", "8", "--temperature", "0.8", "--top-k", "20")
    assert again.stdout == proc.stdout  # seeded


@pytest.mark.parametrize(
    ("args", "stdin", "says"),
    [
        (["--dtype", "fp8"], "hi", "--dtype 'fp8' is not one of"),
        (["--tokens"], "1 two 3", "token 1 of the prompt, 'two', is not a token id"),
        (["-n", "300"], "hi", "exceeds the model's max_seq_len 256"),
        (["--temperature", "-1"], "hi", "temperature must be in 0..100"),
    ],
)
def test_bad_input_exits_2_naming_it(export: Path, args: list[str], stdin: str, says: str) -> None:
    proc = refused(str(export), *args, stdin=stdin)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and "Traceback" not in proc.stderr


def test_weights_of_another_model_are_refused_naming_the_tensor(tmp_path: Path) -> None:
    other = tmp_path / "wide.safetensors"
    write_weights(GPT(preset("tiny", dim=128)).state_dict(), other, weights_metadata("tiny", 1))
    proc = refused(str(other), stdin="hi")
    assert proc.returncode == 2
    assert "has shape" in proc.stderr and "tok_embeddings.weight" in proc.stderr
    assert refused(str(tmp_path / "missing.safetensors"), stdin="hi").returncode == 2
