"""A job whose task is ``quantize``, run by ``myolo-train`` as the agent runs any job: one real worker turns a
training export into a quantized model and its manifest; a source whose bytes are not the registered ones is
refused before it is read; the trainer's job check says where such a job may run."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
import torch

from myolo.events.payloads import ModelExport
from myolo.events.payloads.trainer_values import nest
from myolo.kernels.cli.check_job import judge, read_request
from myolo.kernels.export.weights import weights_metadata, write_weights
from myolo.kernels.model import GPT, preset
from myolo.kernels.quantization import load_quantized

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def inputs(tmp_path: Path) -> dict:
    torch.manual_seed(0)
    src = tmp_path / "model.safetensors"
    write_weights(GPT(preset("tiny")).state_dict(), src, weights_metadata("tiny", 12))
    tokens = torch.randint(0, 256, (20_000,), generator=torch.Generator().manual_seed(1)).to(torch.int16)
    (tmp_path / "calib.bin").write_bytes(tokens[:10_000].numpy().tobytes())
    (tmp_path / "eval.bin").write_bytes(tokens[10_000:].numpy().tobytes())
    return {  # by field path; ``sections`` makes the job file of it
        "runtime.task": "quantize",
        "checkpoint.init_from": str(src),
        "checkpoint.init_from_sha256": hashlib.sha256(src.read_bytes()).hexdigest(),
        "checkpoint.export_path": str(tmp_path / "out" / "model-int4.safetensors"),
        "quantization.calib_path": str(tmp_path / "calib.bin"),
        "data.eval_path": str(tmp_path / "eval.bin"),
        "quantization.bits": 4,
        "quantization.scheme": "gptq",
        "quantization.group_size": 32,
        "data.seq_len": 32,
        "quantization.calib_sequences": 16,
        "data.eval_batches": 2,
        "data.global_batch": 4,
    }


def sections(fields: dict) -> dict:
    """The job (a table per section) of ``fields`` by path, those set to None left out."""
    return nest({k: v for k, v in fields.items() if v is not None})


def train(job: dict, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "job.json"
    config.write_text(json.dumps(sections(job)))
    return subprocess.run(
        [sys.executable, "-m", "myolo.kernels.cli.launch", "--nproc", "1", "--config", str(config)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_a_quantize_job_writes_the_quantized_model_and_its_manifest(inputs: dict, tmp_path: Path) -> None:
    proc = train(inputs, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = Path(inputs["checkpoint.export_path"])
    export = msgspec.json.decode(Path(f"{out}.json").read_bytes(), type=ModelExport)
    assert export.quantization is not None and export.eval is not None
    assert (export.quantization.scheme, export.quantization.bits, export.quantization.group_size) == ("gptq", 4, 32)
    assert export.quantization.source_sha256 == inputs["checkpoint.init_from_sha256"]
    assert export.quantization.source_eval is not None
    assert export.eval.dataset_sha256 == export.quantization.source_eval.dataset_sha256
    assert export.steps == 12 and export.sha256 == hashlib.sha256(out.read_bytes()).hexdigest()
    spec = load_quantized(out)[2]
    assert spec.calib_sha256 == hashlib.sha256(Path(inputs["quantization.calib_path"]).read_bytes()).hexdigest()


def test_a_source_that_is_not_the_registered_bytes_is_refused(inputs: dict, tmp_path: Path) -> None:
    proc = train({**inputs, "checkpoint.init_from_sha256": "0" * 64}, tmp_path)
    assert proc.returncode != 0
    assert "init_from_sha256" in proc.stderr and "hashes to" in proc.stderr
    assert not Path(inputs["checkpoint.export_path"]).exists()


@pytest.mark.parametrize(
    ("changes", "world", "field", "says"),
    [
        ({}, 2, "runtime.task", "runs on one worker, not 2"),
        ({"checkpoint.export_path": None}, 1, "checkpoint.export_path", "(--export-path): task quantize needs it"),
        (
            {"quantization.scheme": "gptq", "quantization.calib_path": None},
            1,
            "quantization.calib_path",
            "scheme gptq needs it",
        ),
        ({"quantization.bits": 3}, 1, "quantization.bits", "(--quant-bits): must be 4 or 8"),
    ],
)
def test_the_trainers_check_names_what_a_quantize_job_lacks(inputs: dict, changes, world, field, says) -> None:
    job = sections({**inputs, **changes})
    verdict = judge(read_request(json.dumps({"job": job, "world_size": world}).encode()))
    assert not verdict.ok and verdict.field == f"job.{field}" and says in (verdict.reason or ""), verdict
