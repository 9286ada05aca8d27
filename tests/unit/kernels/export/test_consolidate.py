"""Consolidation in one process: the model part of a DCP checkpoint, as full tensors, found from the checkpoint
root (its marker) or a step directory. Multi-rank layouts: tests/integration/kernels/test_export.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from myolo.kernels.checkpoint import Checkpointer
from myolo.kernels.export.consolidate import consolidate, resolve_checkpoint
from myolo.kernels.model import GPT, preset

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")


def saved_run(root: Path, steps: list[int]) -> GPT:
    """A tiny model and its AdamW, one optimizer step then a synchronous save per entry of ``steps``."""
    torch.manual_seed(0)
    model = GPT(preset("tiny"))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ckpt = Checkpointer(root, 0, [model], [opt], async_save=False)
    for step in steps:
        model(torch.randint(0, 256, (2, 8))).float().square().mean().backward()
        opt.step()
        opt.zero_grad()
        ckpt.maybe_save(step, force=True)
    ckpt.close()
    return model


def test_the_model_part_comes_back_whole_and_nothing_else(tmp_path: Path) -> None:
    model = saved_run(tmp_path, [1, 2])
    full = consolidate(tmp_path)
    assert (full.step, full.source) == (2, tmp_path / "step-00000002")  # the marker's checkpoint
    want = model.state_dict()
    assert full.weights.keys() == want.keys()  # no optimizer state, no rotary buffers (not persistent)
    for name, t in full.weights.items():
        assert t.device.type == "cpu" and t.is_contiguous()
        assert torch.equal(t, want[name]), name


def test_a_step_directory_is_read_as_it_is(tmp_path: Path) -> None:
    saved_run(tmp_path, [1, 2])
    older = consolidate(tmp_path / "step-00000001")
    newer = consolidate(tmp_path / "step-00000002")
    assert (older.step, newer.step) == (1, 2)
    assert not torch.equal(older.weights["output.weight"], newer.weights["output.weight"])


def test_what_is_not_a_checkpoint_says_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_checkpoint(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="pass a step-NNNNNNNN directory"):
        resolve_checkpoint(tmp_path)
    (tmp_path / "latest.json").write_text(
        json.dumps({"step": 4, "path": "step-00000004", "kind": "async", "world_size": 1, "saved_at": 0.0})
    )
    with pytest.raises(FileNotFoundError, match=r"step-00000004, which has no \.metadata"):
        resolve_checkpoint(tmp_path)


def test_a_renamed_step_directory_is_refused(tmp_path: Path) -> None:
    saved_run(tmp_path, [1])
    (tmp_path / "step-00000001").rename(tmp_path / "step-00000009")
    with pytest.raises(ValueError, match="holds step 1, not the 9 its name says"):
        consolidate(tmp_path / "step-00000009")
