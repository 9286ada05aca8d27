"""``Checkpointer``: what the training loop calls once per step to save, snapshot and resume.

Call order in the loop (contract with ``kernels/train``)::

    ckpt = Checkpointer(dir, every=N, model_parts=parts, optimizers=opts, snapshot_every=k)
    start = (ckpt.load_latest() or 0) + 1          # the step the checkpoint holds is already done
    for step in range(start, steps + 1):
        ...train step ``step``...
        ckpt.on_step(step, force=save_requested)   # = snapshot(step) + maybe_save(step, force)
    ckpt.close()

Every method is collective: all ranks call it with the same step, in the same order.
Async saves run DCP in a background thread on a dedicated gloo group (``dcp.async_save`` needs a CPU
backend, and collectives from two threads must not share one group); snapshots run on the default group.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import structlog
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.optim import Optimizer

from myolo.kernels.checkpoint.layout import (
    SAVE_PREFIX,
    checkpoint_dirs,
    default_snapshot_root,
    dir_name,
    missing_files,
    remove_dir,
    remove_rank_files,
)
from myolo.kernels.checkpoint.marker import MARKER_NAME, Marker, advance_marker, read_marker
from myolo.kernels.checkpoint.retention import prune_disk
from myolo.kernels.checkpoint.snapshot import Persister, prune_snapshots, save_snapshot
from myolo.kernels.checkpoint.state import Stateful, apply_state, check_parts, collect_state

log = structlog.get_logger("myolo.kernels.checkpoint")


def _nonneg(name: str, value: int) -> int:
    if not isinstance(value, int) or value < 0:
        raise ValueError(f"Checkpointer: {name} must be an integer >= 0 (0 disables it), got {value!r}")
    return value


class Checkpointer:
    """Sharded, resharding-capable checkpoints (async DCP every ``every`` steps and on demand) plus host
    shared-memory snapshots every ``snapshot_every`` steps, persisted to ``directory`` in the background.

    ``directory=None`` disables disk checkpoints (snapshots then stay in shared memory only).
    ``extra`` maps names to objects with ``state_dict``/``load_state_dict`` saved alongside (LR scheduler,
    a data loader with its own position); the data position itself is the step (determinism contract).
    """

    def __init__(
        self,
        directory: str | Path | None,
        every: int,
        model_parts: list[nn.Module],
        optimizers: list[Optimizer],
        snapshot_every: int = 0,
        extra: Mapping[str, Stateful] | None = None,
        *,
        snapshot_dir: str | Path | None = None,
        job_id: str = "local",
        keep: int = 3,
        async_save: bool = True,
    ) -> None:
        check_parts(model_parts, optimizers)
        self.every = _nonneg("every", every)
        self.snapshot_every = _nonneg("snapshot_every", snapshot_every)
        if not isinstance(keep, int) or keep < 1:
            raise ValueError(f"Checkpointer: keep must be an integer >= 1 (checkpoints kept on disk), got {keep!r}")
        self.keep = keep
        self.directory = Path(directory) if directory is not None else None
        self.model_parts = list(model_parts)
        self.optimizers = list(optimizers)
        self.extra = dict(extra or {})
        self.async_save = async_save
        self.distributed = dist.is_available() and dist.is_initialized()
        self.rank = dist.get_rank() if self.distributed else 0
        self.world_size = dist.get_world_size() if self.distributed else 1
        self.snapshot_root = (
            Path(snapshot_dir) if snapshot_dir is not None else default_snapshot_root(self.directory, job_id)
        )
        # Collective: every rank constructs the Checkpointer at the same point, so new_group lines up.
        self._save_group = dist.new_group(backend="gloo") if self.distributed and self.directory else None
        self._future: Future[None] | None = None
        self.failed_saves: list[str] = []
        self.completed_saves: list[int] = []
        self._persister = (
            Persister(self.snapshot_root, self.directory, self.rank, self.world_size, keep)
            if self.snapshot_every and self.directory is not None
            else None
        )
        self._closed = False
        self._started = False  # load_latest ran, or a fresh start was checked

    # ---------------------------------------------------------------- resume
    def load_latest(self) -> int | None:
        """Restore model, optimizer and ``extra`` from the newest complete checkpoint (shared-memory
        snapshot or disk, whichever holds the later step) and return its step; None when there is none.
        Also removes leftovers of saves newer than it (a crash mid-save), so they cannot be mistaken for
        complete ones later."""
        chosen = self._choose()
        step = None
        if chosen is not None:
            root, marker = chosen
            state = collect_state(self.model_parts, self.optimizers, 0, self.extra)
            t0 = time.perf_counter()
            dcp.load(state, checkpoint_id=root / marker.path, no_dist=not self.distributed)
            step = apply_state(state, self.model_parts, self.optimizers, self.extra)
            if step != marker.step:
                raise RuntimeError(
                    f"checkpoint {root / marker.path} holds step {step} but its marker says {marker.step}; "
                    "the checkpoint directory was modified by hand: remove latest.json to start over"
                )
            log.info(
                "resumed from checkpoint",
                kind=marker.kind,
                path=str(root / marker.path),
                step=step,
                written_by_ranks=marker.world_size,
                ranks=self.world_size,
                load_s=round(time.perf_counter() - t0, 2),
            )
        self._remove_newer_than(-1 if step is None else step)
        self._started = True
        return step

    def _start_fresh(self) -> None:
        """First save of a run that did not resume: refuse to mix with an earlier run's checkpoints on disk
        (the marker only moves forward, so it would keep naming the old run's newer step), and drop stale
        shared-memory snapshots (ours by job id and directory, and obsolete once the run starts over)."""
        self._started = True
        old = read_marker(self.directory) if self.directory else None
        if old is not None:
            raise RuntimeError(
                f"checkpoint directory {self.directory} already holds a checkpoint of step {old.step} from an "
                "earlier run: resume it (--resume, i.e. call load_latest first) or use an empty directory"
            )
        self._remove_newer_than(-1)
        if self.rank == 0:
            (self.snapshot_root / MARKER_NAME).unlink(missing_ok=True)

    def _choose(self) -> tuple[Path, Marker] | None:
        disk = read_marker(self.directory) if self.directory else None
        shm = read_marker(self.snapshot_root) if self.snapshot_root.is_dir() else None
        if shm is not None and (missing := missing_files(self.snapshot_root / shm.path)):
            log.warning(
                "shared-memory snapshot incomplete: resuming from disk instead",
                snapshot=str(self.snapshot_root / shm.path), missing=missing[:4], rank=self.rank,
            )  # fmt: skip
            shm = None
        if self.distributed:
            # Use the shared-memory snapshot only if every rank sees the same one (ranks on another node
            # have their own /dev/shm without it); the disk marker is read by rank 0 for all.
            views: list[Any] = [None] * self.world_size
            dist.all_gather_object(views, (disk, shm))
            disk = views[0][0]
            shm = shm if all(v[1] == views[0][1] for v in views) else None
        candidates = [(m.step, 1, self.snapshot_root, m) for m in [shm] if m is not None]
        if disk is not None and self.directory is not None:
            candidates.append((disk.step, 0, self.directory, disk))
        if not candidates:
            return None
        _, _, root, marker = max(candidates, key=lambda c: (c[0], c[1]))
        return root, marker

    def _remove_newer_than(self, step: int) -> None:
        roots = [r for r in (self.directory, self.snapshot_root) if r is not None]
        for root in roots:
            for s, path in checkpoint_dirs(root):
                if s > step:
                    remove_dir(path) if self.rank == 0 else remove_rank_files(path, self.rank)
        if self.distributed:
            dist.barrier()

    # ---------------------------------------------------------------- saving
    def on_step(self, step: int, force: bool = False) -> None:
        """The per-step hook: snapshot when due, async save when due or forced. When both fall on one
        step the snapshot is not also persisted (the async save writes that step to disk already)."""
        saving = self._save_due(step, force)
        self.snapshot(step, persist=not saving)
        if saving:
            self.maybe_save(step, force=True)

    def _save_due(self, step: int, force: bool) -> bool:
        return self.directory is not None and (force or (self.every > 0 and step % self.every == 0))

    def maybe_save(self, step: int, force: bool = False) -> bool:
        """Start an async sharded save of ``step`` to disk if it is due (``step % every == 0``) or forced.
        Returns True when a save was started. Waits first for the previous save, if still running: only one
        is in flight, which bounds host memory to one staged copy."""
        if not self._save_due(step, force):
            return False
        if not self._started:
            self._start_fresh()
        self.wait()
        assert self.directory is not None
        name = dir_name(SAVE_PREFIX, step)
        state = collect_state(self.model_parts, self.optimizers, step, self.extra)
        checkpoint_id = self.directory / name
        if self.async_save:
            # async_save stages (copies) the state before returning, so training may change it meanwhile.
            future = dcp.async_save(
                state, checkpoint_id=checkpoint_id, process_group=self._save_group, no_dist=not self.distributed
            )
        else:
            future = Future()
            dcp.save(state, checkpoint_id=checkpoint_id, process_group=self._save_group, no_dist=not self.distributed)
            future.set_result(None)
        # Our own future, resolved only after the marker is written: a Future's result() returns before
        # its done-callbacks have run, so waiting on DCP's future alone would race the marker.
        finished: Future[None] = Future()
        self._future = finished
        future.add_done_callback(lambda f, s=step, n=name: self._save_done(f, s, n, finished))
        return True

    def _save_done(self, future: Future[Any], step: int, name: str, finished: Future[None]) -> None:
        try:
            self._record_save(future, step, name)
        finally:
            finished.set_result(None)

    def _record_save(self, future: Future[Any], step: int, name: str) -> None:
        exc = future.exception()
        if exc is not None:
            self.failed_saves.append(f"step {step}: {exc}")
            log.error("checkpoint save failed", step=step, directory=str(self.directory), error=str(exc))
            return
        self.completed_saves.append(step)
        # DCP's save completes on any rank only after rank 0 wrote .metadata: the checkpoint is whole.
        if self.rank == 0 and self.directory is not None:
            advance_marker(self.directory, step=step, path=name, kind="async", world_size=self.world_size)
            prune_disk(self.directory, self.keep, self.world_size)

    def snapshot(self, step: int, force: bool = False, persist: bool = True) -> bool:
        """Copy the state into host shared memory if due (``step % snapshot_every == 0``) or forced, then
        hand it to the background persister. Synchronous: a memory copy per rank plus DCP's planning."""
        if not (force or (self.snapshot_every > 0 and step % self.snapshot_every == 0)):
            return False
        if not self._started:
            self._start_fresh()
        state = collect_state(self.model_parts, self.optimizers, step, self.extra)
        save_snapshot(state, step, self.snapshot_root, self.rank, self.world_size, self.distributed)
        busy = self._persister.in_use() if self._persister else None
        prune_snapshots(self.snapshot_root, step, self.rank, keep_step=busy)
        if self._persister is not None and persist:
            self._persister.submit(step)
        return True

    # ---------------------------------------------------------------- lifecycle
    def wait(self) -> None:
        """Block until the in-flight async save (if any) has finished and its marker is written."""
        if self._future is not None:
            self._future.result()  # never raises: failures are recorded in failed_saves
            self._future = None

    def wait_persisted(self) -> None:
        """Block until submitted snapshots are on disk (tests and orderly shutdown)."""
        if self._persister is not None:
            self._persister.wait_idle()

    def close(self, drop_snapshots: bool = False) -> None:
        """Wait for pending saves and persistence. ``drop_snapshots`` frees this rank's shared memory
        (use at the normal end of a job; keep them when a supervisor may restart the workers)."""
        if self._closed:
            return
        self._closed = True
        self.wait()
        if self._persister is not None:
            self._persister.close()
        if drop_snapshots:
            for _, path in checkpoint_dirs(self.snapshot_root):
                remove_rank_files(path, self.rank)
            if self.distributed:
                dist.barrier()
            if self.rank == 0:
                remove_dir(self.snapshot_root)

    @property
    def latest(self) -> Marker | None:
        """The disk marker (None when disk checkpoints are off or none completed yet)."""
        return read_marker(self.directory) if self.directory else None
