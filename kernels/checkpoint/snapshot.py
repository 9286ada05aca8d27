"""Fast snapshots into host shared memory, persisted to disk by a background thread.

Why: an async DCP save every N steps bounds the loss after a *machine* failure to N steps, but saving to
disk every step is too slow. Most failures are a *process* failing (OOM, a NCCL timeout, a killed worker)
on a machine that keeps running: its ``/dev/shm`` (tmpfs) outlives the process, so a snapshot there every
k steps (a memory copy) lets the restarted workers lose at most k steps. The snapshot is an ordinary DCP
checkpoint, so it also reshards when the restart uses a different layout on the same machine.

Each rank writes its own shards (DCP, synchronously, on the default process group), rank 0 then moves the
shared-memory marker; a per-rank thread copies this rank's files of the newest snapshot to disk, leaves a
``.done-<rank>`` file, and whichever rank completes the set moves the disk marker. The thread does no
collectives, so it never competes with training for the process group. At most two complete snapshots
stay in shared memory (plus one being copied): older files are removed by the rank that wrote them.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Any

import structlog
import torch.distributed.checkpoint as dcp

from myolo.kernels.checkpoint.layout import (
    SNAP_PREFIX,
    checkpoint_dirs,
    dir_name,
    rank_files,
    remove_rank_files,
)
from myolo.kernels.checkpoint.marker import advance_marker, read_marker
from myolo.kernels.checkpoint.retention import DONE_PREFIX, persisted_complete, prune_disk

log = structlog.get_logger("myolo.kernels.checkpoint")


class Persister:
    """One background thread per rank that copies the newest snapshot to disk. When it is still busy with
    an older one, only the newest pending snapshot is kept: persisting every step is never required."""

    def __init__(self, shm_root: Path, disk_root: Path, rank: int, world_size: int, keep: int) -> None:
        self.shm_root = shm_root
        self.disk_root = disk_root
        self.rank = rank
        self.world_size = world_size
        self.keep = keep
        self._cond = threading.Condition()
        self._pending: int | None = None
        self._busy: int | None = None
        self._closed = False
        self.persisted: list[int] = []
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._run, name=f"myolo-snapshot-persist-{rank}", daemon=True)
        self._thread.start()

    def submit(self, step: int) -> None:
        with self._cond:
            self._pending = step
            self._cond.notify_all()

    def in_use(self) -> int | None:
        """The step being copied right now (the snapshot GC must not delete it)."""
        with self._cond:
            return self._busy

    def wait_idle(self) -> None:
        """Block until everything submitted so far has been persisted (or failed)."""
        with self._cond:
            self._cond.wait_for(lambda: self._pending is None and self._busy is None)

    def close(self) -> None:
        self.wait_idle()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending is not None or self._closed)
                if self._pending is None:
                    return
                step, self._pending, self._busy = self._pending, None, self._pending
            try:
                self._persist(step)
                self.persisted.append(step)
            except Exception as exc:  # a failed copy must not kill training; the next snapshot retries
                self.errors.append(f"step {step}: {exc}")
                log.warning("snapshot not persisted", step=step, disk_root=str(self.disk_root), error=str(exc))
            finally:
                with self._cond:
                    self._busy = None
                    self._cond.notify_all()

    def _persist(self, step: int) -> None:
        name = dir_name(SNAP_PREFIX, step)
        src, dst = self.shm_root / name, self.disk_root / name
        files = rank_files(src, self.rank)
        if not files:
            raise FileNotFoundError(f"no files of rank {self.rank} in {src}")
        dst.mkdir(parents=True, exist_ok=True)
        for f in files:
            _durable_copy(f, dst / f.name)
        (dst / f"{DONE_PREFIX}{self.rank}").touch()
        complete = persisted_complete(dst, self.world_size)
        if complete and advance_marker(
            self.disk_root, step=step, path=name, kind="snapshot", world_size=self.world_size
        ):
            prune_disk(self.disk_root, self.keep, self.world_size)


def _durable_copy(src: Path, dst: Path) -> None:
    """Copy via a temporary name and fsync, so a machine crash never leaves a truncated file under the
    final name (the done file, and then the marker, are only written after this returns)."""
    tmp = dst.with_name(f".{dst.name}.tmp")
    with open(src, "rb") as fin, open(tmp, "wb") as fout:
        shutil.copyfileobj(fin, fout, length=16 << 20)
        fout.flush()
        os.fsync(fout.fileno())
    tmp.replace(dst)


def save_snapshot(
    state: dict[str, Any],
    step: int,
    shm_root: Path,
    rank: int,
    world_size: int,
    distributed: bool,
) -> Path:
    """Write ``state`` as a DCP checkpoint under ``shm_root`` (collective over the default group) and
    move the shared-memory marker. Returns the snapshot directory."""
    directory = shm_root / dir_name(SNAP_PREFIX, step)
    dcp.save(state, checkpoint_id=directory, no_dist=not distributed)
    # dcp.save returns on every rank only after rank 0 wrote .metadata, so the snapshot is complete here.
    if rank == 0:
        advance_marker(shm_root, step=step, path=directory.name, kind="snapshot", world_size=world_size)
    return directory


def prune_snapshots(shm_root: Path, newest: int, rank: int, keep_step: int | None) -> None:
    """Delete this rank's files of snapshots older than the previous one.

    Why "older than the previous" and not "older than the newest": another rank may not yet have seen the
    marker move to ``newest``; but every rank's save of ``newest`` returned only after rank 0 had finished
    the previous snapshot and moved the marker to it, so the previous one is safe to rely on."""
    dirs = [(s, p) for s, p in checkpoint_dirs(shm_root) if p.name.startswith(SNAP_PREFIX)]
    older = [s for s, _ in dirs if s < newest]
    previous = max(older) if older else None
    marker = read_marker(shm_root)
    for s, p in dirs:
        if previous is not None and s < previous and s != keep_step and (marker is None or s != marker.step):
            remove_rank_files(p, rank)
