"""The trainer's export, in one process: at the end of a run that trained all its steps, never after a stop;
a run resumed at its last step still exports; the inputs are checked before training; ``init_from`` starts
the model from a file unless a checkpoint is resumed. Multi-rank runs: tests/integration/kernels/test_export.py.
"""

from __future__ import annotations

import hashlib
import warnings
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
from myolo.kernels.export.consolidate import consolidate
from myolo.kernels.export.manifest import manifest_path
from myolo.kernels.model import GPT, preset
from myolo.kernels.train.config import JobConfig, JobConfigError
from myolo.kernels.train.loop import Control, run
from myolo.kernels.train.records import StepRecord
from myolo.kernels.train.session import prepare

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")
SEQ, ROWS = 16, 2


def tokens(path: Path, n: int, seed: int) -> str:
    np.random.default_rng(seed).integers(0, 256, size=n).astype(np.uint16).tofile(path)
    return str(path)


def job(tmp_path: Path, **extra: Any) -> JobConfig:
    """The exporting job; ``extra`` by field path, ``__`` for the dot (``checkpoint__resume=True``)."""
    base = {
        "optimizer.steps": 3,
        "data.global_batch": ROWS,
        "data.seq_len": SEQ,
        "checkpoint.dir": str(tmp_path / "ckpt"),
        "checkpoint.export_path": str(tmp_path / "out" / "model.safetensors"),
    }
    return JobConfig.from_fields({**base, **{k.replace("__", "."): v for k, v in extra.items()}})


def stop_at(step: int) -> Control:
    seen = {"n": 0}

    def poll() -> tuple[bool, bool]:
        seen["n"] += 1
        return False, seen["n"] == step

    return Control(poll=poll)


def test_a_finished_run_exports_its_last_step_once(tmp_path: Path) -> None:
    data = tokens(tmp_path / "train.bin", 4000, 1)
    held = tokens(tmp_path / "eval.bin", 1000, 2)
    beats: list[int] = []
    control = Control(heartbeat=lambda step, force=False: beats.append(step))
    result = run(job(tmp_path, data__path=data, data__eval_path=held, data__eval_batches=2), control=control)
    export = result.export
    assert export is not None
    artifact = tmp_path / "out" / "model.safetensors"
    on_disk = msgspec.json.decode(manifest_path(artifact).read_bytes(), type=ModelExport, strict=True)
    assert on_disk == export
    assert (export.artifact, export.model, export.steps) == (str(artifact), "tiny", 3)
    assert export.sha256 == hashlib.sha256(artifact.read_bytes()).hexdigest()
    assert export.data_sha256 == hashlib.sha256(Path(data).read_bytes()).hexdigest()
    assert export.eval is not None and export.eval.tokens == 2 * ROWS * SEQ and export.init_from is None
    # checkpoint_every is 0: the last step was saved for the export all the same, and is what was exported
    final = consolidate(tmp_path / "ckpt" / "step-00000003")
    exported = safetensors.torch.load_file(artifact)
    assert all(torch.equal(exported[n], t) for n, t in final.weights.items())
    assert beats[-1] == 3  # the export kept the heartbeat


@pytest.mark.parametrize("stop", [1, 3])
def test_a_stopped_run_exports_nothing_even_on_its_last_step(tmp_path: Path, stop: int) -> None:
    result = run(job(tmp_path), control=stop_at(stop))
    assert result.export is None and result.stopped_early == (stop < 3)
    assert not (tmp_path / "out" / "model.safetensors").exists()
    assert (tmp_path / "ckpt" / f"step-{stop:08d}").is_dir()  # the stop's checkpoint, to resume from


def test_a_run_resumed_at_its_last_step_exports_it_without_saving_it_again(tmp_path: Path) -> None:
    run(job(tmp_path, optimizer__steps=2), control=stop_at(2))  # stopped on its last step: no export
    final = tmp_path / "ckpt" / "step-00000002"
    written = {p.name: p.stat().st_mtime_ns for p in final.iterdir()}
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # DCP warns when it overwrites a checkpoint
        warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
        result = run(job(tmp_path, optimizer__steps=2, checkpoint__resume=True))
    assert result.export is not None and result.export.steps == 2
    assert {p.name: p.stat().st_mtime_ns for p in final.iterdir()} == written  # the only checkpoint, untouched
    assert [r for r in result.records if isinstance(r, StepRecord)] == []  # nothing left to train


def test_a_missing_held_out_file_fails_before_training(tmp_path: Path) -> None:
    with pytest.raises(JobConfigError) as caught:
        run(job(tmp_path, data__eval_path=str(tmp_path / "missing.bin")))
    assert caught.value.field == "data.eval_path" and "does not exist" in str(caught.value)
    assert not (tmp_path / "ckpt").exists()


def test_an_export_folder_that_cannot_be_made_fails_before_training(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(JobConfigError) as caught:
        run(job(tmp_path, checkpoint__export_path=str(tmp_path / "file" / "model.safetensors")))
    assert caught.value.field == "checkpoint.export_path" and "cannot create its folder" in str(caught.value)


def test_a_failed_export_fails_the_run_and_leaves_no_manifest(tmp_path: Path) -> None:
    held = tmp_path / "eval.bin"
    np.full(200, 300, dtype=np.uint16).tofile(held)  # ids beyond the tiny model's 256: found at evaluation
    with pytest.raises(ValueError, match="token id 300 >= model vocab_size 256"):
        run(job(tmp_path, data__eval_path=str(held)))
    assert not manifest_path(tmp_path / "out" / "model.safetensors").exists()


def exported(tmp_path: Path, seed: int) -> Path:
    out = tmp_path / f"champion-{seed}"
    result = run(job(out, runtime__seed=seed, optimizer__steps=2))
    assert result.export is not None
    return Path(result.export.artifact)


def test_init_from_loads_the_file_before_the_first_step(tmp_path: Path) -> None:
    champion = exported(tmp_path, seed=7)
    data = tokens(tmp_path / "train.bin", 4000, 3)
    s = prepare(
        JobConfig.from_fields(
            {
                "data.global_batch": ROWS,
                "data.seq_len": SEQ,
                "runtime.seed": 0,
                "checkpoint.init_from": str(champion),
                "data.path": data,
            }
        )
    )
    want = safetensors.torch.load_file(champion)
    assert all(torch.equal(t, want[n]) for n, t in s.pm.parts[0].state_dict().items())
    # and training starts from there: step 1's loss is the champion's loss on step 1's batch
    records = run(
        JobConfig.from_fields(
            {
                "optimizer.steps": 1,
                "data.global_batch": ROWS,
                "data.seq_len": SEQ,
                "checkpoint.init_from": str(champion),
                "data.path": data,
            }
        )
    ).records
    (step1,) = [r for r in records if isinstance(r, StepRecord)]
    model = GPT(preset("tiny"))
    model.load_state_dict(want)
    x, y = TokenFile(data, ROWS, SEQ, seed=0).global_batch(1)
    with torch.no_grad():
        by_hand = F.cross_entropy(model(x).flatten(0, 1).double(), y.flatten()).item()
    assert step1.loss == pytest.approx(by_hand, rel=1e-6)


def test_a_resumed_checkpoint_wins_over_init_from(tmp_path: Path) -> None:
    champion = exported(tmp_path, seed=7)
    later = job(tmp_path / "run", optimizer__steps=2, checkpoint__export_path=None, checkpoint__every=2)
    run(later)
    s = prepare(
        job(
            tmp_path / "run",
            optimizer__steps=3,
            checkpoint__export_path=None,
            checkpoint__resume=True,
            checkpoint__init_from=str(champion),
        )
    )
    assert s.start == 2
    saved = consolidate(tmp_path / "run" / "ckpt").weights
    assert all(torch.equal(t, saved[n]) for n, t in s.pm.parts[0].state_dict().items())


def test_init_from_weights_of_another_model_is_a_job_error(tmp_path: Path) -> None:
    champion = exported(tmp_path, seed=7)
    with pytest.raises(JobConfigError) as caught:
        prepare(
            JobConfig.from_fields(
                {
                    "data.global_batch": ROWS,
                    "data.seq_len": SEQ,
                    "model.args": {"n_layers": 2},
                    "checkpoint.init_from": str(champion),
                }
            )
        )
    assert caught.value.field == "checkpoint.init_from"
    assert "checkpoint.init_from (--init-from):" in str(caught.value) and "'layers.2.attention.wk.weight'" in str(
        caught.value
    )
