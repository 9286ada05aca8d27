"""Which checkpoints on disk to keep: the ``keep`` newest complete ones, and nothing older than those.

Called by whichever thread just moved the disk marker (the async-save callback on rank 0, or the snapshot
persister of the rank that completed a persisted snapshot), so pruning follows completed saves only.
"""

from __future__ import annotations

from pathlib import Path

from myolo.kernels.checkpoint.layout import METADATA, SNAP_PREFIX, checkpoint_dirs, remove_dir

DONE_PREFIX = ".done-"


def persisted_complete(directory: Path, world_size: int) -> bool:
    """A persisted snapshot is complete when every rank of the world that wrote it has left its done file."""
    return all((directory / f"{DONE_PREFIX}{r}").exists() for r in range(world_size))


def is_complete(directory: Path, world_size: int) -> bool:
    if not (directory / METADATA).exists():
        return False
    if directory.name.startswith(SNAP_PREFIX):
        writers = max(world_size, len(list(directory.glob(f"{DONE_PREFIX}*"))))
        return persisted_complete(directory, writers)
    return True


def prune_disk(root: Path, keep: int, world_size: int) -> list[Path]:
    """Delete checkpoint directories older than the ``keep``-th newest complete one; returns them."""
    dirs = checkpoint_dirs(root)
    complete = sorted({s for s, p in dirs if is_complete(p, world_size)})
    if len(complete) <= keep:
        return []
    oldest_kept = complete[-keep]
    removed = [p for s, p in dirs if s < oldest_kept]
    for p in removed:
        remove_dir(p)
    return removed
