"""The "latest" marker: one small JSON file naming the newest *complete* checkpoint.

Why a marker rather than "the highest step directory": a directory appears as soon as a save starts, so a
crash mid-save would leave a newer but unreadable checkpoint. The marker is written only after a save has
completed on every rank, with write-to-temp + fsync + ``os.replace`` so a reader sees either the old or the
new marker, never a torn one. ``advance_marker`` only moves it forward (under an ``flock``), because the
background writers of different kinds of checkpoint (async DCP saves, persisted snapshots) can finish out of
order.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from myolo.common.files import atomic_write

MARKER_NAME = "latest.json"
_LOCK_NAME = ".latest.lock"


@dataclass(frozen=True)
class Marker:
    """What the marker records: the step the checkpoint holds (the loop resumes at ``step + 1``), the data
    position (the step number, by the determinism contract), its directory relative to the root, and the
    world size that wrote it (informational: DCP reshards on load)."""

    step: int
    path: str
    kind: str
    world_size: int
    saved_at: float

    @property
    def data_position(self) -> int:
        return self.step


def write_marker(root: Path, marker: Marker) -> None:
    """Atomically replace ``root/latest.json`` with ``marker``."""
    atomic_write(root / MARKER_NAME, json.dumps(asdict(marker)).encode())


def read_marker(root: Path) -> Marker | None:
    """The marker under ``root``, or None when there is none yet. A marker that cannot be parsed is an
    error (it is only ever written atomically, so it means someone else wrote the file)."""
    path = root / MARKER_NAME
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw)
        return Marker(
            step=int(data["step"]),
            path=str(data["path"]),
            kind=str(data["kind"]),
            world_size=int(data["world_size"]),
            saved_at=float(data["saved_at"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"checkpoint marker {path} is not a valid marker ({exc}); delete it to start from the "
            "newest complete checkpoint by hand, or point the checkpoint directory elsewhere"
        ) from exc


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / _LOCK_NAME, "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def advance_marker(root: Path, *, step: int, path: str, kind: str, world_size: int) -> bool:
    """Point the marker at ``path`` if ``step`` is newer than what it names; True when it moved."""
    with _locked(root):
        current = read_marker(root)
        if current is not None and current.step >= step:
            return False
        write_marker(root, Marker(step=step, path=path, kind=kind, world_size=world_size, saved_at=time.time()))
        return True
