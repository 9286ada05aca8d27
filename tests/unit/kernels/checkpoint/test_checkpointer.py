"""Checkpointer in one process: async save and load, the latest marker, snapshots in shared memory."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp
import torch.nn as nn

from myolo.kernels.checkpoint import Checkpointer, read_marker
from myolo.kernels.checkpoint.marker import Marker, write_marker

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")


class Counter:
    """An ``extra`` stateful object (stands in for an LR scheduler)."""

    def __init__(self) -> None:
        self.n = 0

    def state_dict(self) -> dict[str, int]:
        return {"n": self.n}

    def load_state_dict(self, sd: dict[str, int]) -> None:
        self.n = sd["n"]


def make_model(seed: int = 0) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, step: int) -> float:
    """Data depends on the step only, as the trainer's determinism contract requires."""
    g = torch.Generator().manual_seed(1000 + step)
    x, y = torch.randn(32, 8, generator=g), torch.randn(32, 4, generator=g)
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss.item()


@pytest.fixture
def shm(tmp_path: Path) -> Path:
    return tmp_path / "shm"


@pytest.fixture
def disk(tmp_path: Path) -> Path:
    return tmp_path / "ckpt"


def test_async_save_then_resume_continues_identically(disk: Path, shm: Path) -> None:
    model, opt = make_model()
    counter = Counter()
    ck = Checkpointer(disk, every=3, model_parts=[model], optimizers=[opt], extra={"sched": counter}, snapshot_dir=shm)
    assert ck.load_latest() is None
    reference = {}
    for step in range(1, 9):
        reference[step] = train_step(model, opt, step)
        counter.n += 1
        if step <= 6:
            ck.on_step(step)
    ck.close()
    marker = read_marker(disk)
    assert marker is not None and (marker.step, marker.path, marker.kind) == (6, "step-00000006", "async")
    assert marker.data_position == 6

    model2, opt2 = make_model(seed=123)  # different init: everything must come from the checkpoint
    counter2 = Counter()
    ck2 = Checkpointer(
        disk, every=3, model_parts=[model2], optimizers=[opt2], extra={"sched": counter2}, snapshot_dir=shm
    )
    assert ck2.load_latest() == 6
    assert counter2.n == 6
    # Same losses as the uninterrupted run for the steps after the checkpoint (optimizer state restored).
    assert [train_step(model2, opt2, s) for s in (7, 8)] == [reference[7], reference[8]]
    ck2.close()


def test_async_save_holds_the_state_at_call_time(disk: Path, shm: Path) -> None:
    model, opt = make_model()
    train_step(model, opt, 1)
    ck = Checkpointer(disk, every=1, model_parts=[model], optimizers=[opt], snapshot_dir=shm)
    at_save = {k: v.detach().clone() for k, v in model.state_dict().items()}
    assert ck.maybe_save(1)
    with torch.no_grad():  # training goes on while the save is in flight
        for p in model.parameters():
            p.add_(10.0)
    ck.close()
    model2, opt2 = make_model(seed=5)
    assert Checkpointer(disk, every=1, model_parts=[model2], optimizers=[opt2], snapshot_dir=shm).load_latest() == 1
    for k, v in model2.state_dict().items():
        torch.testing.assert_close(v, at_save[k], rtol=0, atol=0)


def test_maybe_save_only_when_due_or_forced(disk: Path, shm: Path) -> None:
    model, opt = make_model()
    ck = Checkpointer(disk, every=4, model_parts=[model], optimizers=[opt], snapshot_dir=shm)
    started = [ck.maybe_save(s) for s in range(1, 9)]
    assert started == [False, False, False, True, False, False, False, True]
    assert ck.maybe_save(9, force=True)
    ck.close()
    assert ck.completed_saves == [4, 8, 9]
    assert read_marker(disk).step == 9  # type: ignore[union-attr]


def test_failed_save_leaves_the_marker_on_the_last_complete_checkpoint(
    disk: Path, shm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, opt = make_model()
    ck = Checkpointer(disk, every=2, model_parts=[model], optimizers=[opt], snapshot_dir=shm)
    train_step(model, opt, 1)
    ck.maybe_save(2)
    ck.wait()
    assert read_marker(disk).step == 2  # type: ignore[union-attr]

    real_write = dcp.FileSystemWriter.write_data

    def failing_write(self, plan, planner):  # type: ignore[no-untyped-def]
        raise OSError("disk full (injected)")

    monkeypatch.setattr(dcp.FileSystemWriter, "write_data", failing_write)
    ck.maybe_save(4)
    ck.wait()
    monkeypatch.setattr(dcp.FileSystemWriter, "write_data", real_write)
    assert ck.failed_saves and "disk full (injected)" in ck.failed_saves[0]
    assert read_marker(disk).step == 2  # type: ignore[union-attr]
    ck.close()

    # A restart resumes from step 2 and clears the half-written step-4 folder.
    model2, opt2 = make_model(seed=9)
    ck2 = Checkpointer(disk, every=2, model_parts=[model2], optimizers=[opt2], snapshot_dir=shm)
    assert ck2.load_latest() == 2
    assert not (disk / "step-00000004").exists()
    ck2.close()


def test_marker_is_replaced_atomically(disk: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = Marker(step=3, path="step-00000003", kind="async", world_size=2, saved_at=1.0)
    write_marker(disk, old)

    def crash(*args: object) -> None:
        raise OSError("killed before rename (injected)")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="injected"):
        write_marker(disk, Marker(step=4, path="step-00000004", kind="async", world_size=2, saved_at=2.0))
    monkeypatch.undo()
    assert read_marker(disk) == old  # readers never see a torn or half-new marker
    assert json.loads((disk / "latest.json").read_text())["step"] == 3


def test_corrupt_marker_is_a_clear_error(disk: Path) -> None:
    disk.mkdir()
    (disk / "latest.json").write_text("{}")
    with pytest.raises(ValueError, match=r"latest\.json is not a valid marker"):
        read_marker(disk)


def _saved_through_step_7(disk: Path, shm: Path, steps: int) -> tuple[Checkpointer, dict[int, object]]:
    """Train ``steps`` steps, checkpointing every 5 and snapshotting every step up to step 7 only, then wait
    for every save: what a process that crashed after step 7 leaves. Returns its checkpointer (not closed)
    and every step's result, for the restored run to match."""
    model, opt = make_model()
    ck = Checkpointer(disk, every=5, model_parts=[model], optimizers=[opt], snapshot_every=1, snapshot_dir=shm)
    reference = {}
    for step in range(1, steps + 1):
        reference[step] = train_step(model, opt, step)
        if step <= 7:
            ck.on_step(step)
    ck.wait()
    ck.wait_persisted()
    return ck, reference


def test_snapshot_restore_after_process_failure(disk: Path, shm: Path) -> None:
    """Disk checkpoint every 5 steps, snapshot every step: a crash after step 7 loses nothing."""
    ck, reference = _saved_through_step_7(disk, shm, 9)
    # "Crash": no close(). Shared memory holds the two newest snapshots, the marker names step 7.
    assert read_marker(shm).step == 7  # type: ignore[union-attr]
    assert sorted(p.name for p in shm.iterdir() if p.is_dir()) == ["snap-00000006", "snap-00000007"]

    model2, opt2 = make_model(seed=77)
    ck2 = Checkpointer(disk, every=5, model_parts=[model2], optimizers=[opt2], snapshot_every=1, snapshot_dir=shm)
    assert ck2.load_latest() == 7
    assert [train_step(model2, opt2, s) for s in (8, 9)] == [reference[8], reference[9]]
    ck2.close()
    ck.close()


def test_a_snapshot_whose_shards_are_gone_is_not_resumed_from(disk: Path, shm: Path) -> None:
    """The marker and .metadata of a snapshot can outlive a shard (a rank killed while pruning; the soak
    found one): the restart resumes from the disk checkpoint instead of failing on the missing file."""
    ck, reference = _saved_through_step_7(disk, shm, 8)
    assert read_marker(shm).step == 7  # type: ignore[union-attr]
    (shm / "snap-00000007" / "__0_0.distcp").unlink()
    for d in disk.glob("snap-*"):  # and no persisted copy of it to fall back on
        for f in sorted(d.rglob("*"), reverse=True):
            f.rmdir() if f.is_dir() else f.unlink()
        d.rmdir()
    (disk / "latest.json").unlink(missing_ok=True)
    ck.close()
    write_marker(disk, Marker(step=5, path="step-00000005", kind="checkpoint", world_size=1, saved_at=1.0))

    model2, opt2 = make_model(seed=5)
    ck2 = Checkpointer(disk, every=5, model_parts=[model2], optimizers=[opt2], snapshot_every=1, snapshot_dir=shm)
    assert ck2.load_latest() == 5
    assert [train_step(model2, opt2, s) for s in (6, 7, 8)] == [reference[6], reference[7], reference[8]]
    ck2.close()


def test_persisted_snapshot_restores_when_shared_memory_is_gone(disk: Path, shm: Path) -> None:
    """A machine restart empties /dev/shm: the background-persisted copy on disk takes over."""
    model, opt = make_model()
    ck = Checkpointer(disk, every=5, model_parts=[model], optimizers=[opt], snapshot_every=2, snapshot_dir=shm)
    reference = {}
    for step in range(1, 9):
        reference[step] = train_step(model, opt, step)
        if step <= 6:
            ck.on_step(step)
    ck.close()
    marker = read_marker(disk)
    assert marker is not None and (marker.step, marker.kind) == (6, "snapshot")
    assert (disk / "snap-00000006" / ".done-0").exists()
    for p in sorted(shm.rglob("*"), reverse=True):
        p.rmdir() if p.is_dir() else p.unlink()

    model2, opt2 = make_model(seed=3)
    ck2 = Checkpointer(disk, every=5, model_parts=[model2], optimizers=[opt2], snapshot_every=2, snapshot_dir=shm)
    assert ck2.load_latest() == 6
    assert [train_step(model2, opt2, s) for s in (7, 8)] == [reference[7], reference[8]]
    ck2.close()


def test_newer_incomplete_checkpoint_is_ignored_and_removed(disk: Path, shm: Path) -> None:
    model, opt = make_model()
    ck = Checkpointer(disk, every=1, model_parts=[model], optimizers=[opt], snapshot_dir=shm)
    ck.maybe_save(1)
    ck.close()
    partial = disk / "step-00000002"
    partial.mkdir()
    (partial / "__0_0.distcp").write_bytes(b"half a file")  # no .metadata, no marker: a crash mid-save
    model2, opt2 = make_model(seed=1)
    ck2 = Checkpointer(disk, every=1, model_parts=[model2], optimizers=[opt2], snapshot_dir=shm)
    assert ck2.load_latest() == 1
    assert not partial.exists()
    ck2.close()


def test_keeps_only_the_newest_checkpoints(disk: Path, shm: Path) -> None:
    model, opt = make_model()
    ck = Checkpointer(disk, every=1, model_parts=[model], optimizers=[opt], keep=2, snapshot_dir=shm)
    for step in range(1, 6):
        ck.maybe_save(step)
    ck.close()
    assert sorted(p.name for p in disk.iterdir() if p.is_dir()) == ["step-00000004", "step-00000005"]


def test_default_snapshot_root_is_in_dev_shm_and_dropped_on_close(disk: Path) -> None:
    model, opt = make_model()
    ck = Checkpointer(disk, every=0, model_parts=[model], optimizers=[opt], snapshot_every=1, job_id="unit test/1")
    try:
        assert ck.snapshot_root.parent == Path("/dev/shm")
        assert ck.snapshot_root.name.startswith("myolo-unit_test_1-")
        assert ck.snapshot(1)
        assert (ck.snapshot_root / "snap-00000001" / ".metadata").exists()
    finally:
        ck.close(drop_snapshots=True)
    assert not ck.snapshot_root.exists()


def test_fresh_run_refuses_a_directory_holding_an_earlier_run(disk: Path, shm: Path) -> None:
    model, opt = make_model()
    ck = Checkpointer(disk, every=1, model_parts=[model], optimizers=[opt], snapshot_every=1, snapshot_dir=shm)
    ck.on_step(1)
    ck.close()
    ck2 = Checkpointer(disk, every=1, model_parts=[model], optimizers=[opt], snapshot_every=1, snapshot_dir=shm)
    with pytest.raises(RuntimeError, match=r"already holds a checkpoint of step 1 .*resume it"):
        ck2.on_step(1)
    ck2.close()


def test_fresh_run_drops_stale_snapshots(shm: Path) -> None:
    model, opt = make_model()
    ck = Checkpointer(None, every=0, model_parts=[model], optimizers=[opt], snapshot_every=1, snapshot_dir=shm)
    for step in (1, 2, 3):
        ck.snapshot(step)
    ck.close()
    ck2 = Checkpointer(None, every=0, model_parts=[model], optimizers=[opt], snapshot_every=1, snapshot_dir=shm)
    ck2.snapshot(1)  # a new run starting over: snapshots 2 and 3 of the old run must not win a resume
    assert sorted(p.name for p in shm.iterdir() if p.is_dir()) == ["snap-00000001"]
    assert read_marker(shm).step == 1  # type: ignore[union-attr]
    ck2.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"every": -1}, "every must be an integer >= 0"),
        ({"snapshot_every": 1.5}, "snapshot_every must be an integer >= 0"),
        ({"keep": 0}, "keep must be an integer >= 1"),
        ({"optimizers": []}, "got 1 model parts but 0 optimizers"),
        ({"model_parts": [], "optimizers": []}, "model_parts is empty"),
    ],
)
def test_bad_arguments_are_named(disk: Path, shm: Path, kwargs: dict[str, object], message: str) -> None:
    model, opt = make_model()
    args: dict[str, object] = {"every": 1, "model_parts": [model], "optimizers": [opt], "snapshot_dir": shm}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        Checkpointer(disk, **args)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
