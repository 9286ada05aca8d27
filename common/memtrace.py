"""Where a long-running process's Python memory goes: opt-in ``tracemalloc`` snapshots, and their diff.

A daemon whose RSS creeps up by a few MiB an hour shows it only after hours, under real load. Set
``MYOLO_TRACEMALLOC_DIR`` before starting the agent or a coordinator: it traces allocations
(``MYOLO_TRACEMALLOC_FRAMES`` deep, 8 by default) and writes ``<name>-<pid>-<n>.snap`` there every
``MYOLO_TRACEMALLOC_EVERY_S`` seconds (600), from a daemon thread, so a stuck event loop is still seen.
``python -m myolo.common.memtrace A.snap B.snap`` prints what grew between two snapshots, biggest first. Beside the
snapshots, ``<name>-<pid>.jsonl`` gets one line per snapshot of where the resident memory sits by allocator
(``common/memstats.py``): a traced heap that stays flat while RSS grows is then placed.
Tracing costs CPU and memory of its own: it is for a diagnosis run, never on by default.
"""

from __future__ import annotations

import os
import sys
import threading
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import msgspec

from myolo.common import memstats
from myolo.common.errors import ConfigError

ENV_DIR, ENV_EVERY, ENV_FRAMES = "MYOLO_TRACEMALLOC_DIR", "MYOLO_TRACEMALLOC_EVERY_S", "MYOLO_TRACEMALLOC_FRAMES"


@dataclass(frozen=True, slots=True)
class TraceSettings:
    dir: Path
    every_s: float = 600.0
    frames: int = 8


def settings_from_env(env: dict[str, str] | os._Environ[str] = os.environ) -> TraceSettings | None:
    """The settings when ``MYOLO_TRACEMALLOC_DIR`` is set; ``ConfigError`` naming the variable when one is bad."""
    where = env.get(ENV_DIR)
    if not where:
        return None
    try:
        every = float(env.get(ENV_EVERY, "600"))
    except ValueError:
        raise ConfigError(ENV_EVERY, f"must be seconds, got {env[ENV_EVERY]!r}") from None
    try:
        frames = int(env.get(ENV_FRAMES, "8"))
    except ValueError:
        raise ConfigError(ENV_FRAMES, f"must be a whole number, got {env[ENV_FRAMES]!r}") from None
    if not every > 0:
        raise ConfigError(ENV_EVERY, f"must be > 0, got {every}")
    if not 1 <= frames <= 100:
        raise ConfigError(ENV_FRAMES, f"must be in [1, 100], got {frames}")
    return TraceSettings(Path(where), every, frames)


class MemTrace:
    """Traces allocations and writes numbered snapshots of them into ``settings.dir``."""

    def __init__(self, name: str, settings: TraceSettings) -> None:
        self.name, self.settings = name, settings
        self.written = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> MemTrace:
        """Begin tracing, write snapshot 0, and keep writing one every ``every_s`` from a daemon thread."""
        self.settings.dir.mkdir(parents=True, exist_ok=True)
        if not tracemalloc.is_tracing():
            tracemalloc.start(self.settings.frames)
        self.dump()
        self._thread = threading.Thread(target=self._run, name="memtrace", daemon=True)
        self._thread.start()
        return self

    def dump(self) -> Path:
        """Write the next snapshot now (atomically: a reader never sees half of one), and append the process's
        memory by allocator to ``<name>-<pid>.jsonl`` (``common/memstats.py``)."""
        path = self.settings.dir / f"{self.name}-{os.getpid()}-{self.written:04d}.snap"
        tmp = path.with_suffix(".tmp")
        tracemalloc.take_snapshot().dump(str(tmp))
        tmp.replace(path)
        with open(self.settings.dir / f"{self.name}-{os.getpid()}.jsonl", "ab") as log:
            log.write(msgspec.json.encode(memstats.sample()) + b"\n")
        self.written += 1
        return path

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.settings.every_s):
            self.dump()


def start_from_env(name: str) -> MemTrace | None:
    """At process start: trace when the environment asks for it, else do nothing. ``ConfigError`` when the
    settings are bad or the directory cannot be written."""
    settings = settings_from_env()
    if settings is None:
        return None
    try:
        return MemTrace(name, settings).start()
    except OSError as exc:
        raise ConfigError(ENV_DIR, f"cannot write snapshots into {settings.dir}: {exc}") from None


def growth(before: Path, after: Path, top: int = 25, depth: int = 8) -> list[str]:
    """The ``top`` allocation sites that grew most between two snapshots, as lines to print (``depth``
    frames each, the allocating one first)."""
    old = tracemalloc.Snapshot.load(str(before))
    new = tracemalloc.Snapshot.load(str(after))
    stats = new.compare_to(old, "traceback")
    total = sum(s.size_diff for s in stats)
    lines = [f"total {total / 2**20:+.2f} MiB over {len(stats)} sites"]
    for stat in stats[:top]:
        lines.append(f"{stat.size_diff / 2**10:+10.1f} KiB {stat.count_diff:+8d} blocks")
        lines.extend(f"        {frame}" for frame in stat.traceback.format(limit=depth, most_recent_first=True))
    return lines


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: python -m myolo.common.memtrace BEFORE.snap AFTER.snap [TOP]", file=sys.stderr)
        return 2
    print("\n".join(growth(Path(argv[0]), Path(argv[1]), int(argv[2]) if len(argv) == 3 else 25)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
