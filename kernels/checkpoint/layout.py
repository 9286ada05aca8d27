"""Names on disk and in shared memory, and the housekeeping that depends only on them.

A checkpoint root holds ``step-NNNNNNNN/`` (async DCP saves), ``snap-NNNNNNNN/`` (snapshots: in /dev/shm,
and their persisted copies on disk) and ``latest.json`` (see ``marker``). DCP names each rank's data file
``__<rank>_<n>.distcp`` and rank 0 writes ``.metadata``; the snapshot code relies on that to copy and delete
only the files this rank wrote, so ranks on other nodes never touch each other's files.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
from pathlib import Path

SAVE_PREFIX = "step-"
SNAP_PREFIX = "snap-"
METADATA = ".metadata"
_DIR_RE = re.compile(r"^(step|snap)-(\d{8})$")


def dir_name(prefix: str, step: int) -> str:
    return f"{prefix}{step:08d}"


def parse_step(name: str) -> int | None:
    """The step of a checkpoint directory name, None for anything else (so we never delete foreign dirs)."""
    m = _DIR_RE.match(name)
    return int(m.group(2)) if m else None


def checkpoint_dirs(root: Path) -> list[tuple[int, Path]]:
    """Our checkpoint directories under ``root``, oldest first."""
    if not root.is_dir():
        return []
    found = [(step, p) for p in root.iterdir() if (step := parse_step(p.name)) is not None and p.is_dir()]
    return sorted(found, key=lambda sp: (sp[0], sp[1].name))


def rank_files(directory: Path, rank: int) -> list[Path]:
    """The files ``rank`` wrote into a DCP directory (rank 0 also owns ``.metadata``)."""
    if not directory.is_dir():
        return []
    files = sorted(directory.glob(f"__{rank}_*.distcp"))
    if rank == 0 and (directory / METADATA).exists():
        files.append(directory / METADATA)
    return files


def missing_files(directory: Path) -> list[str]:
    """The files a DCP checkpoint's ``.metadata`` names that are not in ``directory`` (all of them, as
    ``[".metadata"]``, when it has none or it does not read). A checkpoint is complete when this is empty: a
    rank killed while its files were removed, or another writer pruning, can leave a marker and a
    ``.metadata`` naming shards that are gone."""
    import torch.distributed.checkpoint as dcp  # torch: only where checkpoints are read

    try:
        metadata = dcp.FileSystemReader(str(directory)).read_metadata()
    except (OSError, ValueError, RuntimeError, EOFError):
        return [METADATA]
    names = {info.relative_path for info in (metadata.storage_data or {}).values()}
    return sorted(n for n in names if not (directory / n).is_file())


def remove_rank_files(directory: Path, rank: int) -> None:
    """Delete what ``rank`` wrote, then the directory if it is now empty (another rank may race us)."""
    for f in rank_files(directory, rank):
        with contextlib.suppress(FileNotFoundError):
            f.unlink()
    with contextlib.suppress(OSError):
        directory.rmdir()


def remove_dir(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)


def default_snapshot_root(directory: Path | None, job_id: str) -> Path:
    """A per-job folder in host shared memory. The checkpoint directory is hashed in, so two jobs with the
    same id but different output folders do not resume from each other's snapshots."""
    key = hashlib.sha1(str(directory.resolve() if directory else "").encode()).hexdigest()[:10]
    safe_job = re.sub(r"[^A-Za-z0-9_.-]", "_", job_id)[:64] or "job"
    return Path("/dev/shm") / f"myolo-{safe_job}-{key}"
