"""The export of a real multi-process run (gloo on CPU, the tiny model): rank 0 consolidates the final sharded
checkpoint into exactly the model the ranks hold at the end, whatever the layout; the manifest's checksums and
held-out loss are right; an operator's hand export of the same checkpoint is the same file; and a run started
from an export starts from its weights."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
import safetensors.torch
import torch
import torch.nn.functional as F

from myolo.events.payloads import ModelExport
from myolo.kernels.data import TokenFile
from myolo.kernels.model import GPT, preset
from myolo.kernels.parallel import rendezvous

REPO = Path(__file__).resolve().parents[3]
STEPS, ROWS, SEQ, EVAL_BATCHES = 3, 4, 16, 2

# Runs the real loop (``myolo.kernels.train.loop.run``) with the job given, then gathers this rank's full parameters
# from the live model (DTensor shards all-gathered) and saves them with the run's export.
RUN_AND_GATHER = """
import json, sys, msgspec, torch
torch.set_num_threads(1)
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from myolo.kernels.train import loop
from myolo.kernels.train.config import JobConfig
from myolo.kernels.train.session import prepare
sessions = []
loop.prepare = lambda job: sessions.append(prepare(job)) or sessions[-1]
result = loop.run(JobConfig.from_dict(json.loads(sys.argv[1])))
full = {}
for part in sessions[0].pm.parts:
    state = get_model_state_dict(part, options=StateDictOptions(full_state_dict=True))
    full.update({name: t.detach().cpu().clone() for name, t in state.items()})
export = msgspec.to_builtins(result.export) if result.export is not None else None
torch.save({"params": full, "export": export}, sys.argv[2])
loop.shutdown()
"""


def tokens(path: Path, n: int, seed: int) -> Path:
    np.random.default_rng(seed).integers(0, 256, size=n).astype(np.uint16).tofile(path)
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("data")
    return {"train": tokens(root / "train.bin", 6000, 1), "eval": tokens(root / "eval.bin", 3000, 2)}


def run_ranks(job: dict[str, Any], nproc: int, out: Path) -> list[dict[str, Any]]:
    store = rendezvous.host_store()
    procs = []
    for rank in range(nproc):
        env = {
            **os.environ,
            "RANK": str(rank),
            "WORLD_SIZE": str(nproc),
            "LOCAL_RANK": str(rank),
            **rendezvous.worker_env(store),
            "OMP_NUM_THREADS": "1",
        }
        cmd = [sys.executable, "-c", RUN_AND_GATHER, json.dumps(job), str(out / f"rank{rank}.pt")]
        procs.append(subprocess.Popen(cmd, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True))
    errors = [(p.wait(timeout=300), p.stderr.read() if p.stderr else "") for p in procs]
    assert all(rc == 0 for rc, _ in errors), [err[-3000:] for rc, err in errors if rc]
    return [torch.load(out / f"rank{rank}.pt") for rank in range(nproc)]


LAYOUTS = {"tp2": {"tp": 2}, "pp2": {"pp": 2}}


@pytest.fixture(scope="module", params=list(LAYOUTS))
def trained(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, data: dict[str, Path]):
    out = tmp_path_factory.mktemp(request.param)
    job = {
        "nproc": 2,
        "model": {"name": "tiny"},
        "parallelism": LAYOUTS[request.param],
        "optimizer": {"steps": STEPS},
        "runtime": {"seed": 0},
        "data": {
            "global_batch": ROWS,
            "seq_len": SEQ,
            "path": str(data["train"]),
            "eval_path": str(data["eval"]),
            "eval_batches": EVAL_BATCHES,
        },
        "checkpoint": {"dir": str(out / "ckpt"), "export_path": str(out / "export" / "model.safetensors")},
    }
    dumps = run_ranks(job, 2, out)
    live: dict[str, torch.Tensor] = {}
    for dump in dumps:  # pipeline stages hold disjoint parts; tensor-parallel ranks the same full tensors
        for name, t in dump["params"].items():
            assert name not in live or torch.equal(live[name], t), name
            live[name] = t
    return {"dir": out, "job": job, "live": live, "exports": [d["export"] for d in dumps]}


def manifest_of(trained: dict[str, Any]) -> ModelExport:
    path = Path(trained["job"]["checkpoint"]["export_path"] + ".json")
    return msgspec.json.decode(path.read_bytes(), type=ModelExport, strict=True)


def test_rank_0_exported_once_and_its_manifest_is_the_file(trained: dict[str, Any], data: dict[str, Path]) -> None:
    artifact = Path(trained["job"]["checkpoint"]["export_path"])
    manifest = manifest_of(trained)
    assert trained["exports"][0] == msgspec.to_builtins(manifest) and trained["exports"][1] is None
    assert sorted(p.name for p in artifact.parent.iterdir()) == ["model.safetensors", "model.safetensors.json"]
    assert (manifest.artifact, manifest.model, manifest.steps) == (str(artifact), "tiny", STEPS)
    assert (manifest.sha256, manifest.size_bytes) == (sha256(artifact), artifact.stat().st_size)
    assert manifest.data_sha256 == sha256(data["train"]) and manifest.init_from is None
    assert manifest.eval is not None and manifest.eval.dataset_sha256 == sha256(data["eval"])


def test_the_export_is_the_models_full_weights_at_the_end(trained: dict[str, Any]) -> None:
    exported = safetensors.torch.load_file(trained["job"]["checkpoint"]["export_path"])
    assert exported.keys() == GPT(preset("tiny")).state_dict().keys() == trained["live"].keys()
    for name, t in trained["live"].items():
        assert exported[name].shape == t.shape and torch.equal(exported[name], t), name


def test_the_held_out_loss_is_cross_entropy_of_the_exported_weights(
    trained: dict[str, Any], data: dict[str, Path]
) -> None:
    model = GPT(preset("tiny"))
    model.load_state_dict(safetensors.torch.load_file(trained["job"]["checkpoint"]["export_path"]))
    window = SEQ + 1
    ids = np.fromfile(data["eval"], dtype=np.uint16)[: EVAL_BATCHES * ROWS * window].astype(np.int64)
    batch = torch.from_numpy(ids).view(EVAL_BATCHES * ROWS, window)  # the file's first windows, in order
    with torch.no_grad():
        logp = torch.log_softmax(model(batch[:, :-1]).double(), dim=-1)
    by_hand = -logp.gather(-1, batch[:, 1:, None]).mean().item()
    result = manifest_of(trained).eval
    assert result is not None and result.tokens == EVAL_BATCHES * ROWS * SEQ
    assert result.loss == pytest.approx(by_hand, rel=1e-6)
    assert result.perplexity == pytest.approx(math.exp(result.loss), rel=1e-12)


def test_an_operators_export_of_the_checkpoint_is_the_same_file(trained: dict[str, Any], data: dict[str, Path]) -> None:
    out = trained["dir"] / "by-hand" / "model.safetensors"
    args = ["--eval-data", str(data["eval"]), "--eval-batches", str(EVAL_BATCHES), "--eval-batch-size", str(ROWS)]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "myolo.kernels.cli.export",
            trained["job"]["checkpoint"]["dir"],
            "-o",
            str(out),
            *args,
            "--seq-len",
            str(SEQ),
            "--data",
            str(data["train"]),
        ],
        cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    by_hand = msgspec.json.decode(proc.stdout, type=ModelExport, strict=True)
    job_export = manifest_of(trained)
    assert by_hand.sha256 == job_export.sha256  # byte for byte: the format is deterministic
    assert msgspec.structs.replace(by_hand, artifact=job_export.artifact) == job_export


def loss_on(weights: dict[str, torch.Tensor] | None, x: torch.Tensor, y: torch.Tensor) -> float:
    torch.manual_seed(0)  # the trainer's init for seed 0, where no weights are given
    model = GPT(preset("tiny"))
    if weights is not None:
        model.load_state_dict(weights)
    with torch.no_grad():
        return F.cross_entropy(model(x).flatten(0, 1).double(), y.flatten()).item()


def test_a_run_from_an_export_starts_from_its_weights(trained: dict[str, Any], data: dict[str, Path]) -> None:
    """In another layout than the export's (pp=2 from tp=2 and back): step 1's loss is the exported model's
    loss on step 1's batch, which a fresh model's is far from."""
    init = trained["job"]["checkpoint"]["export_path"]
    other = ["--pp", "2"] if "tp" in trained["job"]["parallelism"] else ["--tp", "2"]
    args = ["--nproc", "2", *other, "--model", "tiny", "--steps", "1", "--seed", "0", "--json", "--init-from", init]
    args += ["--global-batch", str(ROWS), "--seq-len", str(SEQ), "--data", str(data["train"])]
    proc = subprocess.run(
        [sys.executable, "-m", "myolo.kernels.cli.launch", *args],
        cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    (step1,) = [r["loss"] for r in records if r["event"] == "step"]
    x, y = TokenFile(data["train"], ROWS, SEQ, seed=0).global_batch(1)
    exported = loss_on(safetensors.torch.load_file(init), x, y)
    assert step1 == pytest.approx(exported, rel=1e-5)
    assert abs(loss_on(None, x, y) - exported) > 100 * 1e-5 * exported  # the check tells the two apart
