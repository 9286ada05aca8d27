"""The releases of one component on disk, and the links that choose one.

Layout under ``<dir>/<component>/``::

    <version>/            an installed release (pip --target) with its release.json
    <version>.partial/    an install under way; renamed to <version> once complete, so no half version shows
    current -> <version>  the version in use (a relative symlink, replaced atomically)
    previous -> <version> the one before it, for a rollback
    base.json             the version that ran before the first release (the venv's own install), if known

A version is installed when its directory holds a ``release.json`` naming it. Without a ``current`` link the
component runs its base install: rolling back to the base's version removes the link.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import msgspec
import structlog

from myolo.agent.releases.errors import ReleaseError

log = structlog.get_logger("myolo.agent.releases")
RELEASE_FILE = "release.json"
BASE_FILE = "base.json"
CURRENT, PREVIOUS = "current", "previous"
PARTIAL = ".partial"
COMPONENTS = ("agent", "trainer")
TRASH = ".trash-"


class ReleaseInfo(msgspec.Struct, kw_only=True):
    """``release.json``: what was installed, from where, verified against which hash, and when."""

    version: str
    sha256: str
    installed_at: float
    artifact: str


class Switched(msgspec.Struct, kw_only=True):
    """A switch of ``current``: to ``version`` (None: the base install), from ``previous``."""

    version: str | None
    previous: str | None
    changed: bool


class _Base(msgspec.Struct):
    version: str


def current_releases(root: Path) -> dict[str, str | None]:
    """Each component's current release (None: its base install), for the health report."""
    return {component: ReleaseStore(root, component).current() for component in COMPONENTS}


def check_version_name(version: str) -> None:
    """Names a version directory cannot have: the links' and an install's temporary name."""
    if version in (CURRENT, PREVIOUS) or version.endswith(PARTIAL):
        raise ReleaseError(
            f"{version!r} cannot name a version: {CURRENT!r}, {PREVIOUS!r} and names ending in {PARTIAL!r} are "
            "the release directory's own; use another version string",
            "args.version",
        )


class ReleaseStore:
    """``<root>/<component>``: its installed versions, ``current``/``previous`` and the base version."""

    def __init__(self, root: Path, component: str) -> None:
        self.component = component
        self.dir = root / component

    def path(self, version: str) -> Path:
        return self.dir / version

    def partial(self, version: str) -> Path:
        return self.dir / f"{version}{PARTIAL}"

    @property
    def current_path(self) -> Path:
        """The stable path of the version in use (what goes on PYTHONPATH), whichever version it is."""
        return self.dir / CURRENT

    # ------------------------------------------------------------------ reading
    def info(self, version: str) -> ReleaseInfo | None:
        """The installed release ``version``, or None (absent, or a directory that is not a complete one)."""
        try:
            info = msgspec.json.decode((self.path(version) / RELEASE_FILE).read_bytes(), type=ReleaseInfo)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None
        return info if info.version == version else None

    def installed(self) -> list[ReleaseInfo]:
        """Every installed version, oldest install first."""
        try:
            names = [p.name for p in self.dir.iterdir() if p.is_dir() and not p.is_symlink()]
        except FileNotFoundError:
            return []
        found = [i for n in names if not n.startswith(".") and (i := self.info(n)) is not None]
        return sorted(found, key=lambda i: (i.installed_at, i.version))

    def current(self) -> str | None:
        return self._link(CURRENT)

    def previous(self) -> str | None:
        return self._link(PREVIOUS)

    def base(self) -> str | None:
        try:
            return msgspec.json.decode((self.dir / BASE_FILE).read_bytes(), type=_Base).version
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None

    def describe(self) -> str:
        """``a, b (current b)``: for a refusal that names what is here."""
        names = [i.version for i in self.installed()]
        current, base = self.current(), self.base()
        text = ", ".join(names) or "none"
        text += f" (current {current})" if current else " (current: the base install)"
        return text + (f"; base install {base}" if base else "")

    # ------------------------------------------------------------------ checks
    def check_new(self, version: str, sha256: str) -> ReleaseInfo | None:
        """Before installing: the release already there with the same hash (nothing to do), None when it is
        not installed; a different hash under the same version is refused (a version names one build)."""
        check_version_name(version)
        info = self.info(version)
        if info is not None and info.sha256 != sha256:
            raise ReleaseError(
                f"{self.component} {version} is installed already from another artifact (sha256 {info.sha256}, "
                f"not {sha256}); a new build needs a new version",
                "args.sha256",
            )
        return info

    def check_rollback(self, version: str) -> None:
        if self.info(version) is None and version != self.base():
            raise ReleaseError(
                f"{self.component} {version} is not installed on this node; installed: {self.describe()}",
                "args.version",
            )

    # ------------------------------------------------------------------ changing
    def switch(self, version: str, *, base: str | None = None) -> Switched:
        """Point ``current`` at the installed ``version`` and ``previous`` at the one it replaces. ``base``:
        the version running without a release, recorded when the switch leaves the base install."""
        if self.info(version) is None:
            raise ReleaseError(f"{self.component} {version} is not installed; installed: {self.describe()}")
        old = self.current()
        if old == version:
            return Switched(version=version, previous=self.previous(), changed=False)
        if old is None:
            if base is not None:
                self._write_base(base)
            self._drop_link(PREVIOUS)  # the base install is not a directory here: a rollback names its version
        else:
            self._set_link(PREVIOUS, old)
        self._set_link(CURRENT, version)
        self._sync()
        log.info("release switched", component=self.component, version=version, previous=old or self.base())
        return Switched(version=version, previous=old or self.base(), changed=True)

    def rollback(self, version: str) -> Switched:
        """Back to ``version``: an installed one (a switch), or the base install's (``current`` removed)."""
        self.check_rollback(version)
        return self.restore(version)

    def restore(self, version: str | None) -> Switched:
        """Back to ``version`` (None: the base install) without the checks of a rollback command: what the
        launcher does when a release on trial never committed. A version no longer installed means the base."""
        if version is not None and self.info(version) is not None:
            return self.switch(version)
        old = self.current()
        if old is None:
            return Switched(version=None, previous=self.previous(), changed=False)
        self._set_link(PREVIOUS, old)
        self._drop_link(CURRENT)
        self._sync()
        log.info("release switched to the base install", component=self.component, previous=old)
        return Switched(version=None, previous=old, changed=True)

    def prune(self, keep: int) -> list[str]:
        """Remove the oldest versions beyond ``keep`` (never the current or previous one), and what an
        interrupted prune or install left behind. Returns the versions removed."""
        kept = {self.current(), self.previous()}
        versions = [i.version for i in self.installed()]
        removable = [v for v in versions if v not in kept]
        doomed = removable[: max(0, len(versions) - keep)]
        for version in doomed:
            self._remove(self.path(version), version)
        for leftover in self.dir.glob(f"{TRASH}*"):
            shutil.rmtree(leftover, ignore_errors=True)
        if doomed:
            log.info("releases pruned", component=self.component, removed=doomed, keep=keep)
        return doomed

    # ------------------------------------------------------------------ internals
    def _link(self, name: str) -> str | None:
        try:
            target = os.readlink(self.dir / name)
        except OSError:
            return None
        version = Path(target).name
        return version if self.info(version) is not None else None  # a dangling link runs the base install

    def _set_link(self, name: str, version: str) -> None:
        """Replace the link atomically: a new symlink under a temporary name, renamed over the old one."""
        tmp = self.dir / f".{name}.{os.getpid()}.tmp"
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        os.symlink(version, tmp)
        os.replace(tmp, self.dir / name)

    def _drop_link(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.dir / name).unlink()

    def _write_base(self, version: str) -> None:
        tmp = self.dir / f".{BASE_FILE}.tmp"
        tmp.write_bytes(msgspec.json.encode(_Base(version)))
        os.replace(tmp, self.dir / BASE_FILE)

    def _remove(self, path: Path, version: str) -> None:
        """Renamed away first, so a removal cut short never leaves a half version that looks installed."""
        trash = self.dir / f"{TRASH}{version}.{os.getpid()}"
        os.rename(path, trash)
        shutil.rmtree(trash, ignore_errors=True)

    def _sync(self) -> None:
        """The links' renames reach the disk before the agent restarts into them."""
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
