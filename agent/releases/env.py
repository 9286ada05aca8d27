"""PYTHONPATH for code that runs from a release: the component's ``current`` link first.

The link's path is stable (it is the link, not the version it points at), so an environment made once stays
right across switches, and a link that does not exist yet costs nothing (Python skips missing entries).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

PYTHONPATH = "PYTHONPATH"


def python_path(existing: str | None, first: str | Path, *, drop: tuple[str | Path, ...] = ()) -> str:
    """``first`` then ``existing``'s entries, without repeats of ``first`` or any of ``drop``."""
    skip = {str(first), *map(str, drop)}
    rest = [p for p in (existing or "").split(os.pathsep) if p and p not in skip]
    return os.pathsep.join([str(first), *rest])


def release_link(releases_dir: str | Path, component: str) -> Path:
    return Path(releases_dir) / component / "current"


def trainer_env(environ: Mapping[str, str], releases_dir: str | Path) -> dict[str, str]:
    """The workers' environment: the trainer's current release first on PYTHONPATH, and the agent's release
    off it (the agent's wheel carries the trainer's code too, of the agent's version, not the trainer's)."""
    env = dict(environ)
    env[PYTHONPATH] = python_path(
        environ.get(PYTHONPATH),
        release_link(releases_dir, "trainer"),
        drop=(release_link(releases_dir, "agent"),),
    )
    return env
